// Whether this translation unit is compiled under AddressSanitizer, for GCC
// (__SANITIZE_ADDRESS__) and clang (__has_feature). Tests use it to run statistical cases on
// fewer draws in the sanitizer build, which checks memory, not distributions.
#pragma once

namespace tachyon {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace tachyon

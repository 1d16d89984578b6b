// Command-line flags of the tachyon subcommands, declared on CLI11 (CLI/CLI.hpp, header-only).
//
// Each subcommand builds one CLI::App with NewCommandApp, declares its flags on it with the
// typed helpers below (or CLI11's own add_option / add_flag for strings and switches), and
// parses with ParseFlags. The same declarations give the `--help` text. Values are strict: an
// integer flag takes only a whole decimal number inside its range, a number flag only a finite
// number inside its range, a choice flag only one of its choices; anything else is one error
// line naming the flag, e.g.
//
//   tachyon bench: error: -p/--n-prompt: 'abc' is not an integer
//
// CLI11 reports its errors by throwing; ParseFlags catches them all, so no exception leaves
// this module.
#pragma once

#include <charconv>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

#include "model/kv_cache.h"
#include "util/status.h"

namespace tachyon::cli {

// A CLI::App for `tachyon NAME`: usage and errors say "tachyon NAME"; a flag given twice
// keeps its last value; `-h, --help` prints the help.
std::unique_ptr<CLI::App> NewCommandApp(const std::string& name, const std::string& description);

// Parses argv[1..argc) (argv[0] is the subcommand's name). Returns std::nullopt when the
// command should go on; otherwise the exit code to return: 0 after printing the help to stdout
// (-h, --help), 2 after printing one line "tachyon NAME: error: MESSAGE" to stderr.
std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv);

// "-p,--n-prompt" -> "-p/--n-prompt": how errors name a flag.
std::string FlagDisplayName(std::string_view names);

// Parses all of `text` as a base-10 integer of type T (a leading '-' only for signed T).
// std::nullopt for anything else, including a value outside T's range.
template <class T>
std::optional<T> ParseInteger(std::string_view text) {
  static_assert(std::is_integral_v<T>);
  T v{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v, 10);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  return v;
}

// Parses all of `text` as a finite decimal number.
std::optional<double> ParseNumber(std::string_view text);

// Shortest "%g" rendering of v ("0.8", "1e+06").
std::string FormatNumber(double v);

// Parses a byte size: a positive number with an optional unit K, M, G or T (powers of 1024;
// "KB", "KiB" and the like mean the same), e.g. "512M", "1.5G", "4096". std::nullopt for
// anything else.
std::optional<int64_t> ParseByteSize(std::string_view text);

// The error for a value of flag `names` that does not parse: "NAME: 'VALUE' is not WHAT".
CLI::ValidationError BadValue(std::string_view names, std::string_view value,
                              std::string_view what);

// An integer flag: *out is set when given; values outside [lo, hi] are rejected. The help
// shows *out's value at declaration as the default (override with ->default_str()).
template <class T>
CLI::Option* AddInt(CLI::App& app, const std::string& names, T* out, T lo, T hi,
                    const std::string& help) {
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, lo, hi](const std::string& text) {
        // Parsed as the widest type first, so that a too-large value reads "out of range".
        using Wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
        const std::optional<Wide> v = ParseInteger<Wide>(text);
        const bool digits =
            !text.empty() && (text[0] == '-' || (text[0] >= '0' && text[0] <= '9')) &&
            text.find_first_not_of("0123456789", 1) == std::string::npos && text != "-";
        if (!v && !digits) throw BadValue(names, text, "an integer");
        if (!v || *v < static_cast<Wide>(lo) || *v > static_cast<Wide>(hi)) {
          throw BadValue(names, text,
                         "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        }
        *out = static_cast<T>(*v);
      },
      help);
  opt->type_name("INT")->default_str(std::to_string(*out));
  return opt;
}

// A number flag (float or double): values outside [lo, hi], NaN and infinities are rejected.
template <class T>
CLI::Option* AddNumber(CLI::App& app, const std::string& names, T* out, double lo, double hi,
                       const std::string& help) {
  static_assert(std::is_floating_point_v<T>);
  CLI::Option* opt = app.add_option_function<std::string>(
      names,
      [names, out, lo, hi](const std::string& text) {
        const std::optional<double> v = ParseNumber(text);
        if (!v) throw BadValue(names, text, "a number");
        if (*v < lo || *v > hi) {
          throw BadValue(names, text, "in [" + FormatNumber(lo) + ", " + FormatNumber(hi) + "]");
        }
        *out = static_cast<T>(*v);
      },
      help);
  opt->type_name("NUM")->default_str(FormatNumber(*out));
  return opt;
}

// A byte-size flag (see ParseByteSize), at most `max_bytes`.
CLI::Option* AddByteSize(CLI::App& app, const std::string& names, int64_t* out, int64_t max_bytes,
                         const std::string& help);

// A duration in seconds (fractions allowed, e.g. 0.5), in [0, max_seconds].
CLI::Option* AddSeconds(CLI::App& app, const std::string& names, std::chrono::milliseconds* out,
                        double max_seconds, const std::string& help);

// A flag whose value must be one of `choices` (compared exactly).
CLI::Option* AddChoice(CLI::App& app, const std::string& names, std::string* out,
                       std::vector<std::string> choices, const std::string& help);

// A string flag checked by `check` (e.g. a library's own Find/Parse): when it returns an
// error, the error line is "NAME: MESSAGE".
CLI::Option* AddChecked(CLI::App& app, const std::string& names, std::string* out,
                        std::function<Status(const std::string&)> check, const std::string& help);

// A comma-separated list of integers, each in [lo, hi], at least one ("1,4,16,64").
CLI::Option* AddIntList(CLI::App& app, const std::string& names, std::vector<int>* out, int lo,
                        int hi, const std::string& help);

// --kv-cache-dtype style flag: f16, bf16, q8_0, q4_0, q4_1 or f32 (kernels::ParseKvDtype).
CLI::Option* AddKvDtype(CLI::App& app, const std::string& names, model::KvDtype* out,
                        const std::string& help);

// The --quantize choices: quantize float weights at load.
inline const std::vector<std::string>& QuantizeAtLoadChoices() {
  static const std::vector<std::string> kChoices = {"q8_0", "q4_0", "q4_k"};
  return kChoices;
}

}  // namespace tachyon::cli

// Where the shared reference data lives: $TACHYON_TESTDATA, else <source>/../shared/testdata
// (TACHYON_SOURCE_DIR env or compile definition), else ../shared/testdata from the cwd.
#pragma once

#include <string>

namespace tachyon {

// The testdata folder, or "" if none of the candidates exists.
std::string TestdataDir();

}  // namespace tachyon

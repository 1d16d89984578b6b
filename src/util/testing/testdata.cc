#include "util/testing/testdata.h"

#include <sys/stat.h>

#include <cstdlib>

namespace tachyon {
namespace {
bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
}  // namespace

std::string TestdataDir() {
  if (const char* env = std::getenv("TACHYON_TESTDATA")) {
    return IsDir(env) ? std::string(env) : std::string();
  }
  if (const char* src = std::getenv("TACHYON_SOURCE_DIR")) {
    std::string p = std::string(src) + "/../shared/testdata";
    if (IsDir(p)) return p;
  }
#ifdef TACHYON_SOURCE_DIR
  {
    std::string p = std::string(TACHYON_SOURCE_DIR) + "/../shared/testdata";
    if (IsDir(p)) return p;
  }
#endif
  for (const char* p : {"../shared/testdata", "../../shared/testdata", "../../../shared/testdata"}) {
    if (IsDir(p)) return p;
  }
  return "";
}

}  // namespace tachyon

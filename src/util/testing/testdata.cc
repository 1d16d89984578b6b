#include "util/testing/testdata.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace tachyon {
namespace {

namespace fs = std::filesystem;

bool IsDir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// <dir>/shared/testdata for `start` and each of its parents; "" when none is a folder.
std::string SearchUp(fs::path start) {
  for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
    const fs::path candidate = dir / "shared" / "testdata";
    if (IsDir(candidate)) return candidate.string();
    if (dir == dir.parent_path()) break;
  }
  return "";
}

}  // namespace

std::string SmolLm2Path() {
  std::error_code ec;
  if (const char* p = std::getenv("TACHYON_SMOLLM2")) return fs::is_regular_file(p, ec) ? p : "";
  const char* home = std::getenv("HOME");
  if (!home) return "";
  const fs::path p = fs::path(home) / ".cache/tachyon/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return fs::is_regular_file(p, ec) ? p.string() : "";
}

std::string TestdataDir() {
  if (const char* env = std::getenv("TACHYON_TESTDATA")) {
    return IsDir(env) ? std::string(env) : std::string();
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (std::string found = SearchUp(exe.parent_path()); !found.empty()) return found;
  }
  const fs::path cwd = fs::current_path(ec);
  return ec ? std::string() : SearchUp(cwd);
}

std::vector<std::string> FilesWithSuffix(const std::string& dir, std::string_view suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > suffix.size() && name.ends_with(suffix)) out.push_back(dir + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tachyon

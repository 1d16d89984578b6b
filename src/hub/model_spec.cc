#include "hub/model_spec.h"

#include <sys/stat.h>

namespace tachyon::hub {

namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool IsValidPart(std::string_view s) {
  if (s.empty() || s.size() > 96) return false;
  for (char c : s) {
    if (!IsNameChar(c)) return false;
  }
  if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
  return s.find("..") == std::string_view::npos && s.find("--") == std::string_view::npos;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Names that can only be paths. "org/x.gguf" is a path, "org/x:f.gguf" a repo and file.
bool LooksLikePath(std::string_view s) {
  const bool has_file = s.find(':') != std::string_view::npos;
  return s.front() == '/' || s.front() == '.' || s.front() == '~' || EndsWith(s, "/") ||
         (!has_file && EndsWith(s, ".gguf"));
}

bool Exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

Status CheckFile(std::string_view file, std::string_view spec) {
  if (file.empty()) return OkStatus();
  size_t i = 0;
  while (i <= file.size()) {
    size_t j = file.find('/', i);
    if (j == std::string_view::npos) j = file.size();
    std::string_view part = file.substr(i, j - i);
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("model '" + std::string(spec) + "': bad file name '" +
                             std::string(file) + "'");
    }
    i = j + 1;
  }
  return OkStatus();
}

// "ORG/NAME[@REV]" into repo and revision.
bool SplitRepo(std::string_view s, ModelSpec* out) {
  const size_t at = s.find('@');
  std::string_view repo = s.substr(0, at);
  if (at != std::string_view::npos) {
    std::string_view rev = s.substr(at + 1);
    if (rev.empty() || rev.find_first_of(" :/\\") != std::string_view::npos) return false;
    out->revision = std::string(rev);
  }
  if (!IsValidRepoId(repo)) return false;
  out->repo = std::string(repo);
  return true;
}

}  // namespace

bool IsValidRepoId(std::string_view repo) {
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos) return false;
  return IsValidPart(repo.substr(0, slash)) && IsValidPart(repo.substr(slash + 1));
}

std::string ModelSpec::ToString() const {
  if (kind == Kind::kLocal) return path;
  std::string s = repo;
  if (revision != "main") s += "@" + revision;
  if (!file.empty()) s += ":" + file;
  return s;
}

Result<ModelSpec> ParseModelSpec(std::string_view spec) {
  if (spec.empty()) return InvalidArgument("empty model name");
  ModelSpec out;
  const std::string s(spec);
  if (spec.substr(0, 5) == "hf://") {
    std::string_view rest = spec.substr(5);
    // ORG/NAME[@REV] is the first two components; the rest is FILE.
    const size_t first = rest.find('/');
    const size_t second = first == std::string_view::npos ? first : rest.find('/', first + 1);
    std::string_view repo = rest.substr(0, second);
    if (!SplitRepo(repo, &out)) {
      return InvalidArgument("model '" + s + "': expected hf://ORG/NAME[@REV][/FILE]");
    }
    out.kind = ModelSpec::Kind::kHub;
    if (second != std::string_view::npos) out.file = std::string(rest.substr(second + 1));
    RETURN_IF_ERROR(CheckFile(out.file, spec));
    return out;
  }
  if (Exists(s) || LooksLikePath(spec)) {
    out.path = s;
    return out;
  }
  // ORG/NAME[@REV][:FILE]
  const size_t colon = spec.find(':');
  std::string_view repo = spec.substr(0, colon);
  ModelSpec hub;
  if (!SplitRepo(repo, &hub)) {
    out.path = s;  // a local name that does not exist: the loader reports it
    return out;
  }
  hub.kind = ModelSpec::Kind::kHub;
  if (colon != std::string_view::npos) {
    hub.file = std::string(spec.substr(colon + 1));
    if (hub.file.empty()) return InvalidArgument("model '" + s + "': empty FILE after ':'");
    RETURN_IF_ERROR(CheckFile(hub.file, spec));
  }
  return hub;
}

}  // namespace tachyon::hub

#include "hub/cache.h"
#include "util/strings.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tachyon::hub {

namespace fs = std::filesystem;

std::string DefaultCacheDir() {
  if (std::string v = EnvOrEmpty("HF_HUB_CACHE"); !v.empty()) return v;
  if (std::string v = EnvOrEmpty("HF_HOME"); !v.empty()) return v + "/hub";
  if (std::string v = EnvOrEmpty("XDG_CACHE_HOME"); !v.empty()) return v + "/huggingface/hub";
  std::string home = EnvOrEmpty("HOME");
  if (home.empty()) home = "/tmp";
  return home + "/.cache/huggingface/hub";
}

bool IsCommitHash(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string EtagToBlobName(const std::string& etag) {
  std::string s = etag;
  if (s.rfind("W/", 0) == 0) s = s.substr(2);
  s.erase(std::remove(s.begin(), s.end(), '"'), s.end());
  if (s.empty() || s.size() > 128) return "";
  for (char c : s) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    c == '-' || c == '_';
    if (!ok) return "";
  }
  return s;
}

RepoCache::RepoCache(std::string cache_dir, std::string repo)
    : repo_(std::move(repo)), cache_dir_(std::move(cache_dir)) {
  folder_ = "models--" + repo_;
  for (size_t p = folder_.find('/'); p != std::string::npos; p = folder_.find('/', p)) {
    folder_.replace(p, 1, "--");
  }
  dir_ = cache_dir_ + "/" + folder_;
}

std::string RepoCache::LockPath(const std::string& etag) const {
  return cache_dir_ + "/.locks/" + folder_ + "/" + etag + ".lock";
}

std::string RepoCache::BlobPath(const std::string& etag) const {
  return dir_ + "/blobs/" + etag;
}

std::string RepoCache::SnapshotDir(const std::string& commit) const {
  return dir_ + "/snapshots/" + commit;
}

std::string RepoCache::SnapshotPath(const std::string& commit, const std::string& file) const {
  return SnapshotDir(commit) + "/" + file;
}

std::optional<std::string> RepoCache::ReadRef(const std::string& revision) const {
  if (IsCommitHash(revision)) return revision;
  std::ifstream in(dir_ + "/refs/" + revision);
  std::string commit;
  if (!in || !std::getline(in, commit)) return std::nullopt;
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) {
    commit.pop_back();
  }
  if (!IsCommitHash(commit)) return std::nullopt;
  return commit;
}

Status RepoCache::WriteRef(const std::string& revision, const std::string& commit) const {
  if (IsCommitHash(revision) && revision == commit) return OkStatus();
  const fs::path path = fs::path(dir_) / "refs" / revision;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  const std::string tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << commit;
    if (!out) return Unavailable(tmp + ": cannot write");
  }
  fs::rename(tmp, path, ec);
  if (ec) return Unavailable(path.string() + ": " + ec.message());
  return OkStatus();
}

Status RepoCache::Prepare(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  fs::create_directories(dir_ + "/blobs", ec);
  if (ec) return Unavailable(dir_ + "/blobs: cannot create: " + ec.message());
  fs::create_directories(cache_dir_ + "/.locks/" + folder_, ec);
  if (ec) return Unavailable(cache_dir_ + "/.locks: cannot create: " + ec.message());
  const fs::path parent = fs::path(SnapshotPath(commit, file)).parent_path();
  fs::create_directories(parent, ec);
  if (ec) return Unavailable(parent.string() + ": cannot create: " + ec.message());
  return OkStatus();
}

Status RepoCache::Link(const std::string& commit, const std::string& file,
                       const std::string& etag) const {
  RETURN_IF_ERROR(Prepare(commit, file));
  const fs::path link(SnapshotPath(commit, file));
  const fs::path target = fs::relative(fs::path(BlobPath(etag)), link.parent_path());
  std::error_code ec;
  if (fs::is_symlink(link, ec) && fs::read_symlink(link, ec) == target) return OkStatus();
  // Made beside and renamed over, so a reader (another pull) never sees the file missing.
  const fs::path tmp = link.string() + ".tmp-" + std::to_string(::getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) {
    // File systems without symlinks: copy the blob instead.
    ec.clear();
    fs::copy_file(BlobPath(etag), tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) return Unavailable(link.string() + ": cannot link to the blob: " + ec.message());
  }
  fs::rename(tmp, link, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Unavailable(link.string() + ": cannot link to the blob: " + ec.message());
  }
  return OkStatus();
}

bool RepoCache::Has(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return fs::is_regular_file(SnapshotPath(commit, file), ec);
}

std::vector<std::string> RepoCache::ListSnapshot(const std::string& commit) const {
  std::vector<std::string> files;
  const fs::path root(SnapshotDir(commit));
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (fs::is_regular_file(it->path(), e2)) {
      files.push_back(it->path().lexically_relative(root).string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace tachyon::hub

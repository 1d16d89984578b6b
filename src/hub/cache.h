// The local model cache, in the layout of Hugging Face's own hub cache (so models already
// downloaded by huggingface_hub are found, and vice versa):
//
//   CACHE/models--ORG--NAME/
//     blobs/ETAG                 file contents, named by the Hub's ETag (the sha256 for LFS
//                                files, the git blob sha1 otherwise); ETAG.incomplete while
//                                downloading (resumed with an HTTP Range request)
//     refs/REVISION              the commit hash REVISION ("main", a tag) last resolved to
//     snapshots/COMMIT/FILE      relative symlink to ../../blobs/ETAG (FILE may have folders)
//   CACHE/.locks/models--ORG--NAME/ETAG.lock   one download of a blob at a time
//
// CACHE is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
// ~/.cache/huggingface/hub.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "util/status.h"

namespace tachyon::hub {

// The cache folder from the environment as above.
std::string DefaultCacheDir();

class RepoCache {
 public:
  RepoCache(std::string cache_dir, std::string repo);

  const std::string& repo() const { return repo_; }
  // CACHE/models--ORG--NAME
  const std::string& dir() const { return dir_; }
  std::string BlobPath(const std::string& etag) const;
  std::string IncompletePath(const std::string& etag) const {
    return BlobPath(etag) + ".incomplete";
  }
  // CACHE/.locks/models--ORG--NAME/ETAG.lock (as huggingface_hub keeps its locks).
  std::string LockPath(const std::string& etag) const;
  std::string SnapshotDir(const std::string& commit) const;
  std::string SnapshotPath(const std::string& commit, const std::string& file) const;

  // The commit `revision` resolves to: a 40-hex revision is itself; else refs/REVISION.
  // nullopt when unknown.
  std::optional<std::string> ReadRef(const std::string& revision) const;
  Status WriteRef(const std::string& revision, const std::string& commit) const;
  // Creates blobs/ and the snapshot folder (with FILE's sub-folders).
  Status Prepare(const std::string& commit, const std::string& file) const;
  // Points snapshots/COMMIT/FILE at blobs/ETAG (replacing what was there).
  Status Link(const std::string& commit, const std::string& file, const std::string& etag) const;
  // True when snapshots/COMMIT/FILE exists and resolves to a file.
  bool Has(const std::string& commit, const std::string& file) const;
  // Every file of a snapshot, relative to it, sorted.
  std::vector<std::string> ListSnapshot(const std::string& commit) const;

 private:
  std::string repo_;
  std::string cache_dir_;
  std::string folder_;  // models--ORG--NAME
  std::string dir_;
};

// True for a 40-digit lowercase hex string (a git commit hash).
bool IsCommitHash(const std::string& s);

// An ETag header value as a blob name: W/ prefix and quotes removed; "" when it is not a safe
// file name.
std::string EtagToBlobName(const std::string& etag);

}  // namespace tachyon::hub

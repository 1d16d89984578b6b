// A small Hugging Face Hub client over libcurl: repository metadata and resumable, verified
// file downloads into the cache (hub/cache.h).
//
// Endpoints (the Hub's public HTTP API):
//   GET  {endpoint}/api/models/{repo}/revision/{rev}?blobs=true
//        -> {"sha": COMMIT, "siblings": [{"rfilename", "size", "blobId", "lfs": {"sha256"}}]}
//   HEAD {endpoint}/{repo}/resolve/{commit}/{file}
//        -> X-Repo-Commit, ETag (or X-Linked-Etag / X-Linked-Size on the redirect of an LFS
//           file: the ETag of an LFS file is its sha256), Content-Length
//   GET  {endpoint}/{repo}/resolve/{commit}/{file}  (redirects followed; Range to resume)
// HF_TOKEN is sent as "Authorization: Bearer" (curl drops it on redirects to other hosts).
//
// Thread-safety: a HubClient may be used from several threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "hub/cache.h"
#include "util/status.h"

namespace tachyon::hub {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // $HF_ENDPOINT
  std::string token;                                // $HF_TOKEN (or $HUGGING_FACE_HUB_TOKEN)
  bool offline = false;                             // $HF_HUB_OFFLINE=1: only the cache
  std::string cache_dir;                            // hub/cache.h DefaultCacheDir()
  int parallel = 4;                                 // files downloaded at once
  int retries = 3;  // attempts per file (each resumes the partial download)
  long connect_timeout_s = 10;
  bool progress = true;  // report on stderr (a bar on a terminal, lines otherwise)
};

// Options from the environment variables above.
HubOptions HubOptionsFromEnv();

struct RepoFileInfo {
  std::string path;     // "model-00001-of-00002.safetensors"
  int64_t size = -1;    // bytes; -1 unknown
  std::string sha256;   // LFS files: the sha256 of the contents; "" otherwise
  std::string blob_id;  // git blob id; "" if unknown
};

struct RepoInfo {
  std::string commit;
  std::vector<RepoFileInfo> files;
};

// Aggregated download progress of one pull; prints on stderr.
class Progress {
 public:
  Progress(bool enabled, int64_t total_bytes, int n_files);
  ~Progress();
  void FileStarted(const std::string& file, int64_t size);
  void FileDone(const std::string& file);
  void Add(int64_t bytes);  // may go negative when a download restarts
  void Finish();

 private:
  void Render(bool force);

  bool enabled_;
  bool tty_;
  std::atomic<int64_t> done_{0};
  int64_t total_;
  int n_files_;
  int files_done_ = 0;
  std::mutex mu_;
  double start_s_;
  double last_render_s_ = 0;
  bool finished_ = false;
};

class HubClient {
 public:
  explicit HubClient(HubOptions options);
  const HubOptions& options() const { return options_; }

  // Commit and file list of `repo` at `revision`. Errors: NotFound (no such repo/revision),
  // Unauthenticated (gated/private: HF_TOKEN), Unavailable (network).
  Result<RepoInfo> GetRepoInfo(const std::string& repo, const std::string& revision) const;

  // Makes snapshots/COMMIT/FILE of `cache` available: reuses a blob already present,
  // otherwise downloads into blobs/ETAG.incomplete (resuming what is there with a Range
  // request, retrying dropped connections), checks size and sha256 (LFS), then moves it into
  // place. A checksum mismatch deletes the partial file and returns DataLoss.
  Status Download(const RepoCache& cache, const std::string& commit, const RepoFileInfo& file,
                  Progress* progress) const;

  // {endpoint}/{repo}/resolve/{commit}/{file}
  std::string ResolveUrl(const std::string& repo, const std::string& commit,
                         const std::string& file) const;

 private:
  HubOptions options_;
};

}  // namespace tachyon::hub

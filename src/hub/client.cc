#include "hub/client.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hub/sha256.h"
#include "util/json_text.h"
#include "util/strings.h"

namespace tachyon::hub {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// Percent-encodes one path segment (or several, keeping '/').
std::string Escape(const std::string& s, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' ||
        (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / 1048576.0);
  return buf;
}

// One HTTP exchange. Headers are kept per response; `first` holds the headers of the first
// response of a redirect chain (where the Hub puts X-Linked-Etag / X-Repo-Commit).
struct Exchange {
  std::map<std::string, std::string> first, last;
  int n_responses = 0;
  std::string body;         // GET without a file sink (capped)
  FILE* sink = nullptr;     // body goes here when the final status is 200/206
  int64_t sink_offset = 0;  // bytes already in the sink before this request
  bool truncated_sink = false;
  Progress* progress = nullptr;
  int64_t written = 0;
  CURL* curl = nullptr;
  bool write_error = false;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    ++ex->n_responses;
    ex->last.clear();
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string key = AsciiLower(line.substr(0, colon));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front())))
    value.erase(0, 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  ex->last[key] = value;
  if (ex->n_responses == 1) ex->first[key] = value;
  return size * n;
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* ex = static_cast<Exchange*>(user);
  const size_t len = size * n;
  long code = 0;
  curl_easy_getinfo(ex->curl, CURLINFO_RESPONSE_CODE, &code);
  if (ex->sink == nullptr || (code != 200 && code != 206)) {
    if (ex->body.size() < (1 << 20)) ex->body.append(data, std::min<size_t>(len, 1 << 20));
    return len;
  }
  if (code == 200 && ex->sink_offset > 0 && !ex->truncated_sink) {
    // The server ignored the Range: start over.
    if (ftruncate(fileno(ex->sink), 0) != 0 || std::fseek(ex->sink, 0, SEEK_SET) != 0) {
      ex->write_error = true;
      return 0;
    }
    if (ex->progress) ex->progress->Add(-ex->sink_offset);
    ex->sink_offset = 0;
    ex->truncated_sink = true;
  }
  if (std::fwrite(data, 1, len, ex->sink) != len) {
    ex->write_error = true;
    return 0;
  }
  ex->written += static_cast<int64_t>(len);
  if (ex->progress) ex->progress->Add(static_cast<int64_t>(len));
  return len;
}

struct Request {
  std::string url;
  bool head = false;
  bool follow = true;
  int64_t range_from = 0;
};

// Runs one request; returns the final HTTP status (0 with an error status on transport
// failure).
Result<long> Perform(const HubOptions& o, const Request& r, Exchange* ex) {
  GlobalInit();
  CURL* c = curl_easy_init();
  if (c == nullptr) return Internal("curl_easy_init failed");
  ex->curl = c;
  curl_slist* headers = nullptr;
  if (!o.token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + o.token).c_str());
  }
  headers = curl_slist_append(headers, "User-Agent: tachyon/0.1");
  curl_easy_setopt(c, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, r.follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, o.connect_timeout_s);
  // A transfer slower than 1 byte/s for 60 s is dead.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, ex);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, ex);
  if (r.head) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  std::string range;
  if (r.range_from > 0) {
    range = std::to_string(r.range_from) + "-";
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  ex->curl = nullptr;
  if (ex->write_error) return Unavailable("cannot write the downloaded data (disk full?)");
  if (rc != CURLE_OK) {
    return Unavailable(std::string(curl_easy_strerror(rc)) + " (" + r.url + ")");
  }
  return code;
}

// A clear error for a non-2xx status.
Status HttpError(long code, const std::string& what, const Exchange& ex) {
  std::string detail;
  if (auto it = ex.last.find("x-error-message"); it != ex.last.end()) detail = ": " + it->second;
  const std::string msg = what + ": HTTP " + std::to_string(code) + detail;
  if (code == 401 || code == 403) {
    return Unauthenticated(msg +
                           " (gated or private repository: accept its terms on the Hub "
                           "and set HF_TOKEN)");
  }
  if (code == 404) return NotFound(msg);
  if (code == 429 || code >= 500) return Unavailable(msg);
  return InvalidArgument(msg);
}

std::string Header(const std::map<std::string, std::string>& h, const char* key) {
  auto it = h.find(key);
  return it == h.end() ? std::string() : it->second;
}

// An exclusive advisory lock (flock) on a file, held for the object's lifetime. Best effort:
// without it (a file system that refuses locks) downloads still work, unserialized.
class BlobLock {
 public:
  explicit BlobLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_;
};

}  // namespace

HubOptions HubOptionsFromEnv() {
  HubOptions o;
  if (std::string v = EnvOrEmpty("HF_ENDPOINT"); !v.empty()) {
    while (!v.empty() && v.back() == '/') v.pop_back();
    o.endpoint = v;
  }
  o.token = EnvOrEmpty("HF_TOKEN");
  if (o.token.empty()) o.token = EnvOrEmpty("HUGGING_FACE_HUB_TOKEN");
  const std::string off = AsciiLower(EnvOrEmpty("HF_HUB_OFFLINE"));
  o.offline = off == "1" || off == "true" || off == "yes" || off == "on";
  o.cache_dir = DefaultCacheDir();
  return o;
}

// ---- Progress ----

Progress::Progress(bool enabled, int64_t total_bytes, int n_files)
    : enabled_(enabled),
      tty_(isatty(2) != 0),
      total_(total_bytes),
      n_files_(n_files),
      start_s_(NowSeconds()) {}

Progress::~Progress() {
  Finish();
}

void Progress::FileStarted(const std::string& file, int64_t size) {
  if (!enabled_ || tty_) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::fprintf(stderr, "pull: downloading %s (%s)\n", file.c_str(),
               size >= 0 ? MiB(size).c_str() : "size unknown");
}

void Progress::FileDone(const std::string& file) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++files_done_;
  if (!tty_) std::fprintf(stderr, "pull: %s done (%d/%d)\n", file.c_str(), files_done_, n_files_);
}

void Progress::Add(int64_t bytes) {
  done_ += bytes;
  if (enabled_ && tty_) Render(false);
}

void Progress::Render(bool force) {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = NowSeconds();
  if (!force && now - last_render_s_ < 0.2) return;
  last_render_s_ = now;
  const int64_t done = done_.load();
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(done) / total_) : 0.0;
  const int width = 30;
  std::string bar(static_cast<size_t>(frac * width), '#');
  bar.resize(width, '.');
  const double rate = done / std::max(1e-3, now - start_s_) / 1048576.0;
  std::fprintf(stderr, "\r[%s] %3.0f%% %s / %s  %.1f MiB/s  files %d/%d ", bar.c_str(), frac * 100,
               MiB(done).c_str(), total_ > 0 ? MiB(total_).c_str() : "?", rate, files_done_,
               n_files_);
  std::fflush(stderr);
}

void Progress::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (tty_) {
    Render(true);
    std::fputc('\n', stderr);
  }
}

// ---- HubClient ----

HubClient::HubClient(HubOptions options) : options_(std::move(options)) {
  if (options_.cache_dir.empty()) options_.cache_dir = DefaultCacheDir();
  if (options_.parallel < 1) options_.parallel = 1;
  if (options_.retries < 1) options_.retries = 1;
}

std::string HubClient::ResolveUrl(const std::string& repo, const std::string& commit,
                                  const std::string& file) const {
  return options_.endpoint + "/" + repo + "/resolve/" + Escape(commit, false) + "/" +
         Escape(file, true);
}

Result<RepoInfo> HubClient::GetRepoInfo(const std::string& repo,
                                        const std::string& revision) const {
  Exchange ex;
  Request r;
  r.url = options_.endpoint + "/api/models/" + repo + "/revision/" + Escape(revision, false) +
          "?blobs=true";
  ASSIGN_OR_RETURN(long code, Perform(options_, r, &ex));
  if (code != 200) return HttpError(code, repo + "@" + revision, ex);
  Result<json> parsed = ParseJsonDocument(ex.body, r.url);
  json j = parsed.ok() ? std::move(parsed).value() : json();
  if (!j.is_object()) {
    return InvalidArgument(r.url + ": the Hub's answer is not a JSON object");
  }
  RepoInfo info;
  if (j.contains("sha") && j["sha"].is_string()) info.commit = j["sha"].get<std::string>();
  if (!IsCommitHash(info.commit)) {
    return InvalidArgument(r.url + ": the Hub's answer has no commit hash (\"sha\")");
  }
  if (j.contains("siblings") && j["siblings"].is_array()) {
    for (const json& s : j["siblings"]) {
      if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
      RepoFileInfo f;
      f.path = s["rfilename"].get<std::string>();
      if (f.path.empty() || f.path.find("..") != std::string::npos || f.path.front() == '/') {
        continue;
      }
      if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
      if (s.contains("blobId") && s["blobId"].is_string())
        f.blob_id = s["blobId"].get<std::string>();
      if (s.contains("lfs") && s["lfs"].is_object()) {
        const json& lfs = s["lfs"];
        if (lfs.contains("sha256") && lfs["sha256"].is_string()) {
          f.sha256 = AsciiLower(lfs["sha256"].get<std::string>());
        }
        if (lfs.contains("size") && lfs["size"].is_number_integer()) {
          f.size = lfs["size"].get<int64_t>();
        }
      }
      info.files.push_back(std::move(f));
    }
  }
  return info;
}

Status HubClient::Download(const RepoCache& cache, const std::string& commit,
                           const RepoFileInfo& file_in, Progress* progress) const {
  RepoFileInfo file = file_in;
  const std::string url = ResolveUrl(cache.repo(), commit, file.path);
  const std::string what = cache.repo() + ": " + file.path;
  // The blob name: the sha256 of an LFS file, else the ETag the Hub reports.
  std::string etag = file.sha256.empty() ? std::string() : file.sha256;
  if (etag.empty()) {
    Exchange ex;
    Request head{url, /*head=*/true, /*follow=*/true, 0};
    ASSIGN_OR_RETURN(long code, Perform(options_, head, &ex));
    if (code != 200) return HttpError(code, what, ex);
    std::string linked = Header(ex.first, "x-linked-etag");
    if (!linked.empty()) {
      etag = EtagToBlobName(linked);
      // An LFS file's ETag is its sha256.
      if (etag.size() == 64) file.sha256 = AsciiLower(etag);
      if (std::string s = Header(ex.first, "x-linked-size"); !s.empty() && file.size < 0) {
        file.size = std::atoll(s.c_str());
      }
    } else {
      etag = EtagToBlobName(Header(ex.last, "etag"));
    }
    if (file.size < 0) {
      if (std::string s = Header(ex.last, "content-length"); !s.empty()) {
        file.size = std::atoll(s.c_str());
      }
    }
    if (etag.empty() && !file.blob_id.empty()) etag = EtagToBlobName(file.blob_id);
    if (etag.empty()) return InvalidArgument(what + ": the Hub sent no usable ETag");
  }
  RETURN_IF_ERROR(cache.Prepare(commit, file.path));
  std::error_code ec;
  const std::string blob = cache.BlobPath(etag);
  // Another process (a second pull, a server starting) may be fetching the same blob: one
  // at a time, and the later one finds the blob in place.
  BlobLock lock(cache.LockPath(etag));
  if (fs::is_regular_file(blob, ec)) {
    if (progress) {
      progress->Add(file.size > 0 ? file.size : 0);
      progress->FileDone(file.path);
    }
    return cache.Link(commit, file.path, etag);
  }
  const std::string part = cache.IncompletePath(etag);
  if (progress) progress->FileStarted(file.path, file.size);
  Status last = OkStatus();
  bool complete = false;
  for (int attempt = 0; attempt < options_.retries && !complete; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(300 * attempt));
    const int64_t have = fs::exists(part, ec) ? static_cast<int64_t>(fs::file_size(part, ec)) : 0;
    if (file.size >= 0 && have > file.size) fs::remove(part, ec);
    const int64_t from = file.size >= 0 && have > file.size ? 0 : have;
    if (file.size >= 0 && from == file.size && from > 0) {
      complete = true;  // a previous run got every byte
      break;
    }
    FILE* f = std::fopen(part.c_str(), from > 0 ? "ab" : "wb");
    if (f == nullptr) return Unavailable(part + ": cannot open for writing");
    if (progress && attempt == 0) progress->Add(from);
    Exchange ex;
    ex.sink = f;
    ex.sink_offset = from;
    ex.progress = progress;
    Request get{url, /*head=*/false, /*follow=*/true, from};
    Result<long> code = Perform(options_, get, &ex);
    const bool closed = std::fclose(f) == 0;
    if (!code.ok()) {
      last = code.status();
      continue;  // dropped connection: resume from what we have
    }
    if (!closed) return Unavailable(part + ": write failed");
    if (*code == 416 && from > 0) {
      // Nothing left to send: the partial file may be complete; the checks below decide.
      complete = true;
      break;
    }
    if (*code != 200 && *code != 206) {
      last = HttpError(*code, what, ex);
      if (*code < 500 && *code != 429) return last;
      continue;
    }
    const int64_t got = static_cast<int64_t>(fs::file_size(part, ec));
    if (file.size >= 0 && got < file.size) {
      last = Unavailable(what + ": connection closed after " + std::to_string(got) + " of " +
                         std::to_string(file.size) + " bytes");
      continue;
    }
    complete = true;
  }
  if (!complete) {
    return Unavailable(last.message() + " (the partial download is kept in " + part +
                       "; run the command again to resume)");
  }
  const int64_t got = static_cast<int64_t>(fs::file_size(part, ec));
  if (file.size >= 0 && got != file.size) {
    fs::remove(part, ec);
    return DataLoss(what + ": size mismatch: expected " + std::to_string(file.size) +
                    " bytes, got " + std::to_string(got) + "; the file was not kept");
  }
  if (!file.sha256.empty()) {
    ASSIGN_OR_RETURN(std::string actual, Sha256File(part));
    if (actual != file.sha256) {
      fs::remove(part, ec);
      return DataLoss(what + ": checksum mismatch: expected sha256 " + file.sha256 + ", got " +
                      actual + "; the file was not kept");
    }
  }
  fs::rename(part, blob, ec);
  if (ec) return Unavailable(blob + ": " + ec.message());
  if (progress) progress->FileDone(file.path);
  return cache.Link(commit, file.path, etag);
}

}  // namespace tachyon::hub

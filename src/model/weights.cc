#include "model/weights.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "util/logging.h"
#include "util/thread_pool.h"

namespace tachyon::model {

namespace {

std::string DimsString(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace

kernels::Weight ExpertSlice(const kernels::Weight& experts, int64_t e) {
  kernels::Weight w = experts;
  w.data = static_cast<const uint8_t*>(experts.data) + e * experts.rows * experts.row_bytes;
  return w;
}

Result<const gguf::TensorInfo*> TensorSource::Find(const std::string& name,
                                                   std::vector<int64_t> dims) {
  const gguf::TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) {
    return InvalidArgument(file_.path() + ": missing tensor " + name + " (expected shape " +
                           DimsString(dims) + ")");
  }
  if (t->dims != dims) {
    return InvalidArgument(file_.path() + ": tensor " + name + " has shape " +
                           DimsString(t->dims) + ", expected " + DimsString(dims));
  }
  if (!GetTypeTraits(static_cast<uint32_t>(t->type))) {
    return Unimplemented(file_.path() + ": tensor " + name + " has unknown type " +
                         std::to_string(static_cast<uint32_t>(t->type)));
  }
  const uint64_t end = file_.data_offset() + t->offset + t->nbytes;
  if (end > file_.file_size() || end < t->offset) {
    return DataLoss(file_.path() + ": tensor " + name + " extends past the end of the file");
  }
  bytes_used_ += t->nbytes;
  return t;
}

Result<kernels::Weight> TensorSource::ToWeight(const gguf::TensorInfo& t, int64_t cols,
                                               int64_t rows) {
  if (!kernels::IsSupportedWeightType(t.type)) {
    return Unimplemented(file_.path() + ": tensor " + t.name + " has type " +
                         std::string(TypeName(t.type)) + ", which matmul does not support");
  }
  const TypeTraits traits = *GetTypeTraits(static_cast<uint32_t>(t.type));
  if (cols % traits.block_size != 0) {
    return InvalidArgument(file_.path() + ": tensor " + t.name + " row length " +
                           std::to_string(cols) + " is not a multiple of the " +
                           std::string(traits.name) + " block size");
  }
  kernels::Weight w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = file_.TensorData(t);
  w.row_bytes = RowBytes(t.type, cols);
  return w;
}

Result<kernels::Weight> TensorSource::Matrix(const std::string& name, int64_t cols,
                                             int64_t rows) {
  ASSIGN_OR_RETURN(kernels::Weight w, Table(name, cols, rows));
  return PackForMatMul(w);
}

Result<kernels::Weight> TensorSource::Table(const std::string& name, int64_t cols,
                                            int64_t rows) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {cols, rows}));
  return ToWeight(*t, cols, rows);
}

kernels::Weight TensorSource::PackForMatMul(const kernels::Weight& w) {
  static const bool enabled = [] {
    const char* v = std::getenv("TACHYON_REPACK");
    return v == nullptr || std::string(v) != "0";
  }();
  if (!enabled || w.packed != nullptr || !kernels::HasPackedLayout(w.type)) return w;
  const size_t bytes = kernels::PackedBytes(w.type, w.rows, w.cols);
  // Tensors that lie in the mapped file can be cached (keyed by their offset in it).
  const auto* data = static_cast<const uint8_t*>(w.data);
  const uint8_t* begin =
      file_.tensors().empty()
          ? nullptr
          : file_.TensorData(file_.tensors()[0]) - file_.tensors()[0].offset - file_.data_offset();
  const bool in_file = begin != nullptr && data >= begin && data < begin + file_.file_size();
  // After FinishLoad the cache belongs to its writer: later matrices are packed in memory.
  if (in_file && !cache_opened_ && !load_finished_) {
    cache_opened_ = true;
    cache_ = PackCache::Open(cache_options_, file_);
  }
  const PackKey key{in_file ? static_cast<uint64_t>(data - begin) : 0,
                    static_cast<uint32_t>(w.type), w.rows, w.cols};
  kernels::Weight out = w;
  if (in_file && cache_ != nullptr && !load_finished_) {
    if (const uint8_t* p = cache_->Find(key, bytes); p != nullptr) {
      out.packed = p;
      bytes_packed_ += bytes;
      bytes_from_cache_ += bytes;
      return out;
    }
  }
  uint8_t* const dst = AllocatePacked(bytes);
  if (dst == nullptr) return w;  // out of memory: the unpacked kernels still work
  // Large matrices are packed on every hardware thread (the pool lives for one matrix:
  // thread start-up is small next to packing megabytes).
  std::unique_ptr<ThreadPool> pool;
  if (bytes >= (size_t{4} << 20) && HardwareThreads() > 1) {
    pool = std::make_unique<ThreadPool>(HardwareThreads());
  }
  kernels::PackWeight(w, dst, pool.get());
  out.packed = dst;
  if (in_file && cache_ != nullptr && !load_finished_) cache_->Add(key, dst, bytes);
  bytes_packed_ += bytes;
  return out;
}

uint8_t* TensorSource::AllocatePacked(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20, kMaxSlab = size_t{64} << 20;
  bytes = (bytes + 63) / 64 * 64;
  if (bytes > slab_left_) {
    // Slabs grow with what was packed so far (a tiny model takes one 2 MiB page, a large
    // one 64 MiB slabs); a matrix larger than that gets a slab of its own size.
    const size_t grow = std::clamp<size_t>(bytes_packed_ - bytes_from_cache_, kHuge, kMaxSlab);
    const size_t n = std::max((bytes + kHuge - 1) / kHuge * kHuge, grow);
    kernels::AlignedBuffer slab = kernels::AllocateAligned(n);
    if (slab == nullptr) return nullptr;
    slab_next_ = slab.get();
    slab_left_ = n;
    packed_.push_back(std::move(slab));
  }
  uint8_t* p = slab_next_;
  slab_next_ += bytes;
  slab_left_ -= bytes;
  return p;
}

TensorSource::~TensorSource() {
  if (cache_writer_.joinable()) cache_writer_.join();
}

void TensorSource::FinishLoad(bool wait) {
  if (load_finished_) return;
  load_finished_ = true;
  if (cache_ == nullptr) return;
  auto save = [cache = cache_.get()] {
    if (Status s = cache->Save(); !s.ok()) TLOG(WARN) << s.message();
  };
  if (wait) {
    save();
  } else {
    cache_writer_ = std::thread(save);
  }
}

Result<kernels::Weight> TensorSource::Experts(const std::string& name, int64_t cols,
                                              int64_t rows, int64_t n) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {cols, rows, n}));
  return ToWeight(*t, cols, rows);
}

Result<const float*> TensorSource::Vector(const std::string& name, int64_t n) {
  ASSIGN_OR_RETURN(const gguf::TensorInfo* t, Find(name, {n}));
  const uint8_t* data = file_.TensorData(*t);
  if (t->type == GgmlType::kF32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(data);
  }
  if (!kernels::IsSupportedWeightType(t->type) ||
      n % GetTypeTraits(static_cast<uint32_t>(t->type))->block_size != 0) {
    return Unimplemented(file_.path() + ": vector tensor " + name + " of type " +
                         std::string(TypeName(t->type)) + " cannot be converted to F32");
  }
  std::vector<float>& out = converted_.emplace_back(n);
  kernels::DequantizeRow(t->type, data, out.data(), n);
  return static_cast<const float*>(out.data());
}

Result<const float*> TensorSource::OptionalVector(const std::string& name, int64_t n) {
  if (!Has(name)) return static_cast<const float*>(nullptr);
  return Vector(name, n);
}

}  // namespace tachyon::model

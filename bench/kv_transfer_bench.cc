// KV transfer over loopback TCP without an engine (docs/pd.md): a PdSender hands every layer
// of B blocks to a PdReceiver in this process, as fast as the sender's thread takes them, and
// waits for the Ack; against plain TCP blasts of the same bytes through one 127.0.0.1
// connection measured in the same benchmark. Shapes: SmolLM2-135M's KV (30 layers, 3 KV heads
// x 64, f16: 6 KiB chunks) and Qwen2.5-Coder-1.5B's (28 layers, 2 KV heads x 128, f16: 8 KiB
// chunks), blocks of 16 tokens; 256 blocks = a 4096-token prompt, handed block by block (as a
// cached prefix goes out). With digests:1 each layer comes with its chunks' wire checksums, as
// the engine hands a block an export computed (it checksums each layer's chunks when it stores
// them, and keeps the values with the page); with digests:0 without them, as a block another
// request computed (the sender computes them). After each transfer (untimed) every block is
// loaded out of the inbox, as the decode engine does, so the receiver's memory is recycled as
// in serving.
// Counters:
//   MiB_s          the transfer: first layer handed -> Ack;
//   blast_MiB_s    the socket's best case: 4 MiB writes and reads of cache-resident buffers;
//   of_blast       MiB_s / blast_MiB_s (issue #20's target: >= 0.8);
//   mem_blast_MiB_s  the same bytes between the same memory as the transfer: written from the
//                  pool, read into as many bytes elsewhere, 512 KiB at a time;
//   of_mem_blast   MiB_s / mem_blast_MiB_s;
//   cpu_per_wall   CPU seconds of all threads over the transfer's wall time (near the core
//                  count: the transfer is CPU-bound);
//   cpu_of_blast   the hot blast's CPU seconds per byte over the transfer's: what of_blast would
//                  be if both were bound by their CPU work alone (on a busy machine, the figure
//                  to read);
//   engine_digest_ms  the engine's part with digests:1: checksumming every chunk of the
//                  transfer right after it was written (while in cache), as the forward pass's
//                  layer hook does; spread over the prefill's steps, not in the transfer's time;
//   hash_MiB_s     that checksum's speed (every row): the receiver's work per byte on top of
//                  the kernel's copy, as it checksums each read's bytes right after the copy;
//   hash_bound     1 / (1 + hash time / the hot blast's CPU time per side, per byte): the
//                  of_blast of a receiver that does the blast's receiver's work (half the
//                  blast's CPU) and checksums every byte besides, each side on its own core:
//                  the ceiling the wire's checksum sets on this machine (CPU times, so a busy
//                  machine moves it less than the wall-clock figures).
//
//   build/kv_transfer_bench [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "kernels/pack.h"
#include "kv/kv_transport.h"
#include "kv/testing/wire_shape.h"
#include "server/pd_receiver.h"
#include "server/pd_sender.h"

namespace tachyon::server {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds of every thread of this process so far (user + system).
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// MiB/s of `bytes` through one loopback TCP connection, written from `src` (from its start
// again at its end) in writes of `piece` bytes and read into a buffer of `dst_bytes` (likewise)
// in reads of `piece`; the CPU seconds it took (both threads) in *cpu_seconds.
double LoopbackBlast(uint64_t bytes, std::span<const uint8_t> src, size_t dst_bytes, size_t piece,
                     double* cpu_seconds) {
  const int srv = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (srv < 0 || bind(srv, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(srv, 1) != 0 || getsockname(srv, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return 0;
  }
  std::vector<uint8_t> dst(dst_bytes, 2);
  std::thread sink([&] {
    const int c = accept(srv, nullptr, nullptr);
    uint64_t got = 0;
    size_t at = 0;
    while (got < bytes) {
      const ssize_t n = read(c, dst.data() + at, std::min(piece, dst.size() - at));
      if (n <= 0) break;
      got += static_cast<uint64_t>(n);
      at = (at + static_cast<size_t>(n)) % dst.size();
    }
    close(c);
  });
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    size_t at = 0;
    for (uint64_t sent = 0; sent < bytes;) {
      const size_t want = std::min<uint64_t>({piece, src.size() - at, bytes - sent});
      const ssize_t n = write(s, src.data() + at, want);
      if (n <= 0) break;
      sent += static_cast<uint64_t>(n);
      at = (at + static_cast<size_t>(n)) % src.size();
    }
  }
  close(s);
  sink.join();
  const double dt = Seconds(t0, Clock::now());
  *cpu_seconds = ProcessCpuSeconds() - cpu0;
  close(srv);
  return static_cast<double>(bytes) / dt / (1 << 20);
}

void BM_Transfer(benchmark::State& state) {
  const kv::KvWireShape shape = kv::testing::PlainF16WireShape(
      static_cast<uint32_t>(state.range(0)), /*block_size=*/16,
      static_cast<uint32_t>(state.range(1)), static_cast<uint32_t>(state.range(2)), {1, 2});
  const uint32_t blocks = static_cast<uint32_t>(state.range(3));
  const bool with_digests = state.range(4) != 0;
  const uint64_t total = uint64_t{blocks} * shape.block_bytes();

  // The "pool": every block's chunks, filled with something other than zeros, in memory like
  // the engine's KV cache (kernels::AllocateAligned: 2 MiB aligned, on transparent huge pages
  // where the kernel allows). Each chunk written, then checksummed while in cache, as the
  // engine does (the values go with the chunks with digests:1).
  const kernels::AlignedBuffer pool_memory = kernels::AllocateAligned(total);
  const std::span<uint8_t> pool(pool_memory.get(), total);
  std::vector<uint8_t> loaded(shape.block_bytes());  // a decode pool block
  const size_t num_chunks = total / shape.chunk_bytes;
  std::vector<uint64_t> digests(num_chunks);
  double digest_seconds = 0;
  for (size_t c = 0; c < num_chunks; ++c) {
    uint8_t* chunk = pool.data() + c * shape.chunk_bytes;
    for (size_t i = 0; i < shape.chunk_bytes; ++i) {
      chunk[i] = static_cast<uint8_t>((c * shape.chunk_bytes + i) * 131 + 7);
    }
    const auto t = Clock::now();
    digests[c] = kv::KvWireChunkDigest({chunk, shape.chunk_bytes});
    digest_seconds += Seconds(t, Clock::now());
  }

  auto inbox = std::make_shared<KvInbox>(int64_t{4} << 30, std::chrono::seconds(120));
  PdReceiver receiver(kv::NewTcpTransport(), shape, inbox);
  if (Status s = receiver.Start("127.0.0.1:0"); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  PdSender sender(kv::NewTcpTransport(), shape);
  // The socket's best case: 4 MiB writes from and reads into cache-resident buffers.
  double blast_cpu = 0;
  const std::vector<uint8_t> hot(4 << 20, 1);
  const double blast = LoopbackBlast(total * 4, hot, hot.size(), hot.size(), &blast_cpu);
  // The same bytes between the same memory as the transfer: written from the pool, read into
  // as many bytes elsewhere, 512 KiB at a time (the transfer's frame size).
  double mem_blast_cpu = 0;
  const double mem_blast = LoopbackBlast(total * 4, pool, total, 512 << 10, &mem_blast_cpu);
  double seconds = 0, cpu_seconds = 0;
  int transfers = 0;
  uint32_t id = 0;
  for (auto _ : state) {
    std::promise<PdTransferResult> done;
    auto sink = sender.Start({receiver.address(), "bench-" + std::to_string(id)}, blocks,
                             [&](const PdTransferResult& r) { done.set_value(r); });
    const auto t0 = Clock::now();
    const double cpu0 = ProcessCpuSeconds();
    for (uint32_t b = 0; b < blocks; ++b) {
      const kv::BlockHash hash{id, b};
      for (uint32_t l = 0; l < shape.layers_per_block; ++l) {
        const size_t c = size_t{b} * shape.num_chunks + 2 * l;
        uint8_t* k = pool.data() + c * shape.chunk_bytes;
        const std::span<uint8_t> chunks[] = {{k, shape.chunk_bytes},
                                             {k + shape.chunk_bytes, shape.chunk_bytes}};
        sink->OnLayer(b, 0, hash, l, chunks,
                      with_digests ? std::span<const uint64_t>(&digests[c], 2)
                                   : std::span<const uint64_t>());
      }
    }
    sink->OnEnd(OkStatus());
    const PdTransferResult r = done.get_future().get();
    seconds += Seconds(t0, Clock::now());
    cpu_seconds += ProcessCpuSeconds() - cpu0;
    ++transfers;
    if (!r.status.ok() || r.blocks_acked != blocks) {
      state.SkipWithError(("transfer failed: " + r.status.ToString()).c_str());
      break;
    }
    // Untimed: the decode engine's part, loading every block into its pool (which frees the
    // inbox's copy, as serving does).
    state.PauseTiming();
    for (uint32_t b = 0; b < blocks; ++b) {
      std::vector<std::span<uint8_t>> dst;
      for (uint32_t c = 0; c < shape.num_chunks; ++c) {
        dst.push_back({loaded.data() + c * shape.chunk_bytes, shape.chunk_bytes});
      }
      if (Status s = inbox->Load(kv::BlockHash{id, b}, dst); !s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
    }
    ++id;
    state.ResumeTiming();
  }
  receiver.Stop();
  const double mib_s = static_cast<double>(total) * transfers / seconds / (1 << 20);
  state.counters["MiB_s"] = mib_s;
  state.counters["blast_MiB_s"] = blast;
  state.counters["of_blast"] = mib_s / blast;
  state.counters["mem_blast_MiB_s"] = mem_blast;
  state.counters["of_mem_blast"] = mib_s / mem_blast;
  state.counters["cpu_per_wall"] = cpu_seconds / seconds;  // 2 = both cores busy throughout
  // CPU time per byte against the blast's: less sensitive to other load than the wall clock.
  state.counters["cpu_of_blast"] = (blast_cpu / 4) / (cpu_seconds / transfers);
  state.counters["engine_digest_ms"] = with_digests ? digest_seconds * 1e3 : 0;
  const double hash = static_cast<double>(total) / digest_seconds / (1 << 20);
  state.counters["hash_MiB_s"] = hash;
  const double blast_side_seconds_per_byte = blast_cpu / 2 / (4 * static_cast<double>(total));
  state.counters["hash_bound"] =
      1 / (1 + digest_seconds / static_cast<double>(total) / blast_side_seconds_per_byte);
  state.SetBytesProcessed(static_cast<int64_t>(total) * transfers);
}

BENCHMARK(BM_Transfer)
    ->ArgNames({"layers", "kv_heads", "head_dim", "blocks", "digests"})
    ->Args({30, 3, 64, 256, 1})   // SmolLM2-135M, 4096 tokens
    ->Args({28, 2, 128, 256, 1})  // Qwen2.5-Coder-1.5B, 4096 tokens
    ->Args({30, 3, 64, 256, 0})   // the same without the engine's checksums
    ->Args({28, 2, 128, 256, 0})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace tachyon::server

BENCHMARK_MAIN();

// Intel AMX tile configuration (used by the *_amx.cc kernels).
//
// AMX has 8 tile registers of up to 16 rows x 64 bytes; their shapes come from a 64-byte
// configuration loaded with ldtilecfg, per thread. Kernels describe the shapes they need in a
// TileConfig and call LoadTileConfig before their first tile instruction; the last loaded
// configuration is remembered per thread, so repeated calls with the same shapes cost one
// 64-byte compare. Only call these where DetectedCpuFeatures().HasAmxSet() (the process has
// been granted the tile state; see util/cpu_features.h).
//
//   TileConfig cfg;
//   cfg.Set(0, 16, 64);   // tile 0: 16 rows of 64 bytes (16 x 16 int32 accumulators)
//   cfg.Set(4, 16, 64);   // tile 4: 16 activation rows of 64 int8
//   cfg.Set(6, 16, 64);   // tile 6: 16 groups of 4 K values x 16 weight rows
//   LoadTileConfig(cfg);
//   ... _tile_loadd / _tile_dpbusd / _tile_stored ...
#pragma once

#include <cstdint>

namespace tachyon::kernels {

inline constexpr int kAmxTiles = 8;

struct alignas(64) TileConfig {
  uint8_t palette = 1;  // palette 1: 8 tiles, 16 rows x 64 bytes at most
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i
  uint8_t rows[16] = {};    // rows of tile i

  void Set(int tile, int nrows, int bytes_per_row) {
    rows[tile] = static_cast<uint8_t>(nrows);
    colsb[tile] = static_cast<uint16_t>(bytes_per_row);
  }
};
static_assert(sizeof(TileConfig) == 64);

// Loads `cfg` into this thread's tile configuration unless it is already loaded.
void LoadTileConfig(const TileConfig& cfg);

// Releases this thread's tile state (tilerelease) and forgets the remembered configuration.
void ReleaseTiles();

}  // namespace tachyon::kernels

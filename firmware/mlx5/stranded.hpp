#pragma once
// mlx5's name for the family-neutral registry of memory a silent firmware may still name
// (firmware/stranded.hpp): the mlx5 layer and its users keep spelling it mlx5::stranded_memory.
#include "firmware/stranded.hpp"

namespace rig::firmware::mlx5 {

using firmware::stranded_memory;
using firmware::stranded_region;

}  // namespace rig::firmware::mlx5

// The mlx5 data-path headers (namespace rig::mlx5::abi) before the firmware layouts (namespace
// rig::mlx5::ifc): inside rig::mlx5 an unqualified `abi::` would find rig::mlx5::abi, so the
// layouts name ::rig::abi in full. This file only has to compile.
#include "abi/mlx5/completion.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/entry.hpp"
#include "abi/mlx5/ifc.hpp"

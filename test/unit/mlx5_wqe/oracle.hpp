#pragma once
// The mlx5dv oracle (mlx5dv_oracle.c, built against rdma-core's mlx5dv.h); RIG_MLX5DV_ORACLE is
// its path, set by meson for this suite.
#include <string>
#include <vector>

#include "test/unit/oracle.hpp"

namespace rig::test {

inline std::vector<std::string> run_mlx5dv_oracle(const std::string& requests) {
    return run_oracle("RIG_MLX5DV_ORACLE", "", requests);
}

}  // namespace rig::test

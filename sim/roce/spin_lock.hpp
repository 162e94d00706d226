#pragma once
// The wire's locks are the project's one spin lock (abi/spin_lock.hpp), under the model's names.
#include "abi/spin_lock.hpp"

namespace rig::sim::roce {

using ::rig::abi::shared_spin_lock;
using ::rig::abi::spin_lock;

}  // namespace rig::sim::roce

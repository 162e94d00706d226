#pragma once
// The two back ends behind driver::open (driver/open.cpp). Each lives in its own folder.
#include <memory>
#include <string_view>

#include "driver/function.hpp"

namespace rig::driver {

// driver/vfio/: a function bound to vfio-pci, by PCI address "0000:bb:dd.f".
result<std::unique_ptr<function>> open_kernel_vfio(std::string_view bdf, const open_options& options);

// driver/vfio_user/: a vfio-user server listening on the UNIX socket at `path`.
result<std::unique_ptr<function>> open_vfio_user(std::string_view path, const open_options& options);

}  // namespace rig::driver

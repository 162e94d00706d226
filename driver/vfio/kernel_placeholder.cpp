// Replaced by the kernel VFIO back end.
#include "driver/backends.hpp"
namespace rig::driver {
result<std::unique_ptr<function>> open_kernel_vfio(std::string_view bdf, const open_options&) {
    return std::unexpected(fail("open", bdf, "the kernel VFIO back end is not built yet"));
}
}  // namespace rig::driver

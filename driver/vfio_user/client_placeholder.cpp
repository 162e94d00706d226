// Replaced by the vfio-user client.
#include "driver/backends.hpp"
namespace rig::driver {
result<std::unique_ptr<function>> open_vfio_user(std::string_view path, const open_options&) {
    return std::unexpected(fail("open", path, "the vfio-user client is not built yet"));
}
}  // namespace rig::driver

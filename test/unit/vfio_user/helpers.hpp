#pragma once
// Shared pieces of the vfio-user tests: a private socket directory, the server in this process
// or in a child process, and a raw connection that writes whatever bytes a test wants.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <sys/types.h>
#include <vector>

#include "test/temp_dir.hpp"
#include "abi/vfio_user/protocol.hpp"
#include "driver/function.hpp"
#include "sim/vfio_user/server.hpp"
#include "test_device.hpp"

namespace rig::test {

using namespace std::chrono_literals;
using std::chrono::steady_clock;

// The test device's socket in `d` (test/temp_dir.hpp).
inline std::string socket_in(const temp_dir& d) { return d.file("dev.sock"); }

// The test device served by a server thread in this process.
struct local_server {
    temp_dir dir;
    test_device dev;
    std::unique_ptr<sim::vfio_user::server> srv;
    explicit local_server(sim::vfio_user::server_options o = {});
    std::string where() const { return "vfio-user:" + socket_in(dir); }
    // until no client is connected and `served` clients have ended (bounded)
    bool wait_served(std::uint64_t served, std::chrono::milliseconds bound = 2000ms) const;
};

// The test device served by the test server executable in a child process.
struct child_server {
    temp_dir dir;
    pid_t pid = -1;
    child_server();
    ~child_server();
    std::string where() const { return "vfio-user:" + socket_in(dir); }
    void kill_now();   // SIGKILL and reap
};

std::unique_ptr<driver::function> open_ok(const std::string& where, driver::open_options o = {});

// 32-bit register of BAR0 through the function
std::uint32_t reg_read(driver::function& f, std::uint32_t off);
void reg_write(driver::function& f, std::uint32_t off, std::uint32_t v);
std::uint64_t ms_since(steady_clock::time_point t0);

// A raw client: bytes in, messages out.
struct raw_message {
    vfio_user::abi::header hdr{};
    std::vector<std::byte> payload;
    std::vector<int> fds;   // closed by the destructor
    raw_message() = default;
    raw_message(raw_message&&) noexcept;
    raw_message& operator=(raw_message&&) = delete;
    ~raw_message();
    bool is_error() const { return (hdr.flags & vfio_user::abi::flag_error) != 0; }
};

class raw_conn {
public:
    explicit raw_conn(const std::string& socket_path);   // connects (REQUIREs success)
    explicit raw_conn(int fd) : _fd(fd) {}               // an accepted connection
    ~raw_conn();
    int fd() const { return _fd; }
    void send_bytes(std::span<const std::byte> b, std::span<const int> fds = {});
    // header + payload with msg_size = 16 + payload unless given
    void send(std::uint16_t cmd, std::span<const std::byte> payload, std::span<const int> fds = {},
              std::optional<std::uint32_t> msg_size = {}, std::uint32_t flags = 0, std::uint16_t id = 7);
    void send_reply(const raw_message& to, std::span<const std::byte> payload, std::span<const int> fds = {});
    // the next message, or nothing when the peer closed or nothing came within `bound`
    std::optional<raw_message> receive(std::chrono::milliseconds bound = 2000ms);
    // true when the peer closed the connection within `bound`
    bool closed_by_peer(std::chrono::milliseconds bound = 2000ms);
    // VERSION with {} capabilities; REQUIREs a good reply
    void handshake();

private:
    int _fd = -1;
};

template <class T>
std::span<const std::byte> bytes_of(const T& v) {
    return std::as_bytes(std::span<const T, 1>(&v, 1));
}

}  // namespace rig::test

#pragma once
// Clients that arrive while another is served (server.hpp: one client at a time). Each is
// accepted at once, answered EBUSY to its first message and closed; one that says nothing within
// `grace`, or sends something other than a command, is closed without a word. The current
// client's session polls them beside its own socket and never waits for one of them: a burst of
// a thousand connections (issue 20, "hostile peers") costs the session a few accepts and
// one-shot non-blocking reads, not a blocking read each. At most `max_held` wait at a time; one
// more is closed at once (refused, as a full listen backlog would refuse it).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <poll.h>

namespace rig::sim::vfio_user {

class newcomers {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::size_t max_held = 256;
    static constexpr std::chrono::milliseconds grace{200};

    explicit newcomers(std::string path) : _path(std::move(path)) {}
    ~newcomers();   // closes every one still held, and logs how many were refused
    newcomers(const newcomers&) = delete;
    newcomers& operator=(const newcomers&) = delete;

    // Accepts every connection the (non-blocking) listening socket holds.
    void accept_all(int listen_fd, clock::time_point now);
    // Appends a pollfd per held connection, in order; serve() reads their revents back.
    void add_pollfds(std::vector<pollfd>& p) const;
    // Answers or closes those whose pollfds (from `p[first]` on) are ready, and those past grace.
    void serve(const std::vector<pollfd>& p, std::size_t first, clock::time_point now);
    // poll's timeout until the next grace ends: -1 when none is held.
    int timeout_ms(clock::time_point now) const;
    std::size_t held() const noexcept { return _held.size(); }
    std::uint64_t refused() const noexcept { return _refused; }

private:
    struct newcomer {
        int fd;
        clock::time_point deadline;
    };
    // Whether `fd` is done with: its first message answered EBUSY, or it closed, or it sent
    // something that is no command. false: fewer than a header's bytes so far.
    bool answer(int fd) noexcept;
    void drop(std::size_t i) noexcept;

    std::string _path;
    std::vector<newcomer> _held;
    std::uint64_t _refused = 0;
};

}  // namespace rig::sim::vfio_user

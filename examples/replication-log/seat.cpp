// A NIC with its completion group and Asio adapter (replication.hpp: seat), as the leader and
// each follower hold one.
#include "replication.hpp"

namespace replog {

outcome<void> seat::open(std::string_view where, boost::asio::io_context& io, std::uint32_t entries,
                         const rig::nic_options& options, const rig::asio::options& async_options) {
    auto n = rig::nic::open(where, options);
    if (!n) {
        return std::unexpected("open: " + n.error().message);
    }
    nic = std::move(*n);
    auto g = nic->make_group({.entries = entries, .log_ring_entries = 8});
    if (!g) {
        return std::unexpected("make_group: " + g.error().message);
    }
    group = std::move(*g);
    auto a = rig::asio::group::make(io.get_executor(), group, async_options);
    if (!a) {
        return std::unexpected("the Asio adapter: " + a.error().message);
    }
    async = std::move(*a);
    return {};
}

void seat::close() {
    if (closed) {
        return;
    }
    closed = true;
    if (nic && !async.closed()) {
        async.close();
    }
    if (nic) {
        static_cast<void>(nic->close());
    }
}

std::string why_failed(const boost::system::error_code& ec, const rig::completion& c) {
    return c.failure ? c.failure->message : ec.message();
}

}  // namespace replog

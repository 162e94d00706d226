#pragma once
// What a model's firmware commands made, changed or destroyed since its data path last looked:
// QP and CQ numbers and memory keys (a number twice, or one no longer there, is fine), or `all`
// when the tables were emptied (a reset, a teardown, a new RoCE channel) or more changed than
// is worth listing. The data path follows just those, so that a command costs it what the
// command touched, not every object of the function: following every table after every
// command made setting up N queue pairs cost N^2 (rig-perf write_bw --sim -q 2048: 95 s on
// mlx5). sim/mlx5/follow.cpp and sim/bnxt/follow.cpp take them.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace rig::sim {

struct object_changes {
    std::vector<std::uint32_t> qps, cqs, keys;
    bool all = true;   // until the data path first takes them

    void note(std::vector<std::uint32_t> object_changes::*kind, std::uint32_t number) {
        constexpr std::size_t most_listed = 4096;   // past this, every table is followed once
        auto& listed = this->*kind;
        if (all) {
            return;
        }
        if (listed.size() >= most_listed) {
            note_all();
            return;
        }
        listed.push_back(number);
    }
    void note_all() { *this = object_changes{}; }
    // Each listed key, then each CQ, then each QP: a QP made names CQs that exist, and one
    // destroyed named CQs that went after it (DESTROY_CQ refuses a CQ a queue pair names).
    template <class Key, class Cq, class Qp>
    void visit(Key&& key, Cq&& cq, Qp&& qp) const {
        for (const std::uint32_t k : keys) {
            key(k);
        }
        for (const std::uint32_t c : cqs) {
            cq(c);
        }
        for (const std::uint32_t q : qps) {
            qp(q);
        }
    }
    // What was noted, leaving nothing noted.
    object_changes take() { return std::exchange(*this, object_changes{{}, {}, {}, false}); }
};

}  // namespace rig::sim

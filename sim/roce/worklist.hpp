#pragma once
// A data path's list of the slots that asked for work, so that a pass walks those instead of
// every slot (issue 17: a pass costs what moves, not the number of queue pairs). A flag in the
// slot (`listed`) says it is in the list, so a slot is in it once however often it asks. The walk
// clears a slot's flag before visiting it and keeps, in order, the slots whose visit asks to
// stay; slots added during the walk are visited in the same walk. Room for every slot is
// reserved on the control path (reset, make_room), so that adding never allocates.
#include <algorithm>
#include <cstddef>
#include <vector>

namespace rig::sim::roce {

template <typename Slot, bool Slot::*listed>
class worklist {
public:
    // Control path: empties the list, with room for `slots` slots.
    void reset(std::size_t slots) {
        for (Slot* s : _slots) {
            s->*listed = false;
        }
        _slots.clear();
        _slots.reserve(slots);
    }

    // Control path: room for `slots` slots, the listed ones kept.
    void make_room(std::size_t slots) { _slots.reserve(slots); }

    // Control path: the slot out of the list (a slot about to go, or listed again from scratch);
    // its flag cleared whether or not it was listed (the flag may stand for "asked" before a
    // control path lists it).
    void remove(Slot& s) noexcept {
        if (s.*listed) {
            std::erase(_slots, &s);
            s.*listed = false;
        }
    }

    void add(Slot& s) noexcept {
        if (!(s.*listed)) {
            s.*listed = true;
            _slots.push_back(&s);   // never allocates: reset() or make_room() left room for every slot
        }
    }

    // visit(Slot&) -> bool: whether the slot stays listed for the next walk.
    template <typename Visit>
    void walk(Visit&& visit) {
        std::size_t kept = 0;
        for (std::size_t i = 0; i < _slots.size(); ++i) {
            Slot& s = *_slots[i];
            s.*listed = false;
            if (visit(s) && !(s.*listed)) {
                s.*listed = true;
                _slots[kept++] = &s;
            }
        }
        _slots.resize(kept);
    }

private:
    std::vector<Slot*> _slots;
};

}  // namespace rig::sim::roce

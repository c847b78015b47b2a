// Must NOT compile: only a machine's dispatcher writes an instance's state
// word (fsm/machine.h), so a trace, which the dispatcher records, shows
// every state change. tests/CMakeLists.txt compiles this file twice, with
// and without WRITE_VALUE, and passes only if each attempt is refused.
#include "car/car.h"

void Bypass(cartage::car::Car& c) {
#ifdef WRITE_VALUE
  c.state_word().value_ = 3;  // the byte itself: private to fsm::Machine
#else
  c.state_word() = cartage::fsm::StateWord();  // a whole word, copied over: deleted
#endif
}

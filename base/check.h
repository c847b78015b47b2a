// The project's small error-handling macros (Abseil 20220623 ships none).
// base/ sits below every other folder, so every layer and every program may
// use them.
//
//   CARTAGE_RETURN_IF_ERROR(pool.Reserve(64));
//   CARTAGE_ASSIGN_OR_RETURN(Car* car, pool.Create(spec));
//   CARTAGE_CHECK(n > 0) << "empty schedule";   // aborts with file:line and message
//   CARTAGE_CHECK_OK(registry.Register(info));
#ifndef CARTAGE_BASE_CHECK_H_
#define CARTAGE_BASE_CHECK_H_

#include <sstream>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cartage::base::internal {

// Collects a CHECK failure message and aborts when destroyed.
class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  ABSL_ATTRIBUTE_NORETURN ~CheckFailure();
  CheckFailure(const CheckFailure&) = delete;
  CheckFailure& operator=(const CheckFailure&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `CARTAGE_CHECK(c) << x;` parse as a void expression.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace cartage::base::internal

#define CARTAGE_CHECK(condition)                      \
  ABSL_PREDICT_TRUE(condition)                        \
  ? (void)0                                           \
  : ::cartage::base::internal::Voidify() &            \
        ::cartage::base::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()

#define CARTAGE_CHECK_OK(expr)                                                    \
  do {                                                                            \
    const ::absl::Status cartage_check_status_ = (expr);                          \
    CARTAGE_CHECK(cartage_check_status_.ok()) << cartage_check_status_.ToString(); \
  } while (0)

#define CARTAGE_RETURN_IF_ERROR(expr)                         \
  do {                                                        \
    ::absl::Status cartage_return_status_ = (expr);           \
    if (ABSL_PREDICT_FALSE(!cartage_return_status_.ok())) {   \
      return cartage_return_status_;                          \
    }                                                         \
  } while (0)

#define CARTAGE_INTERNAL_CONCAT2(a, b) a##b
#define CARTAGE_INTERNAL_CONCAT(a, b) CARTAGE_INTERNAL_CONCAT2(a, b)
#define CARTAGE_ASSIGN_OR_RETURN(lhs, expr) \
  CARTAGE_INTERNAL_ASSIGN_OR_RETURN(CARTAGE_INTERNAL_CONCAT(cartage_statusor_, __LINE__), lhs, expr)
#define CARTAGE_INTERNAL_ASSIGN_OR_RETURN(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  if (ABSL_PREDICT_FALSE(!tmp.ok())) return tmp.status(); \
  lhs = std::move(tmp).value()

#endif  // CARTAGE_BASE_CHECK_H_

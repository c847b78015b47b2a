// The MPI binding's error handling: a communicator's handler (fatal by
// default, MPI_ERRORS_RETURN, MPI_ERRORS_ABORT, or one the program made),
// error classes and codes, and the classes, codes and texts a program
// adds. handles.cc's Error() runs the handler; the texts of the codes it
// makes carry cartage's messages.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "absl/strings/str_format.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

bool Predefined(MPI_Errhandler h) {
  return h == MPI_ERRORS_ARE_FATAL || h == MPI_ERRORS_RETURN || h == MPI_ERRORS_ABORT;
}

int Class(int code) { return code & ((1 << kClassBits) - 1); }

// The first entry of `table` that was let go, or its end.
template <class T>
std::size_t Free(const std::vector<std::optional<T>>& table) {
  std::size_t i = 0;
  while (i < table.size() && table[i].has_value()) ++i;
  return i;
}

// The entry of a class the program added and has not deleted, or null; s.mu held.
std::optional<std::string>* ClassEntry(State& s, int code) {
  const auto i = static_cast<std::size_t>(code - kFirstUserClass);
  if ((code >> kClassBits) != 0 || code < kFirstUserClass || i >= s.user_classes.size()) return nullptr;
  return s.user_classes[i].has_value() ? &s.user_classes[i] : nullptr;
}

// The same for a code.
std::optional<State::AddedCode>* CodeEntry(State& s, int code) {
  const int index = code >> kClassBits;
  const auto i = static_cast<std::size_t>(index - kFirstUserCode);
  if (index < kFirstUserCode || i >= s.user_codes.size() || !s.user_codes[i].has_value()) return nullptr;
  return s.user_codes[i]->cls == Class(code) ? &s.user_codes[i] : nullptr;
}

// The text of a class or code the program added, or null.
std::string* AddedText(State& s, int code) {
  if (auto* c = ClassEntry(s, code); c != nullptr) return &**c;
  if (auto* c = CodeEntry(s, code); c != nullptr) return &(*c)->text;
  return nullptr;
}

// A class a code may be added to: predefined, or added and not deleted.
bool IsClass(State& s, int cls) { return (cls >= 0 && cls < kFirstUserClass) || ClassEntry(s, cls) != nullptr; }

}  // namespace

int LastUsedCode() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  int last = MPI_ERR_LASTCODE;
  for (std::size_t i = 0; i < s.user_classes.size(); ++i) {
    if (s.user_classes[i].has_value()) last = std::max(last, kFirstUserClass + static_cast<int>(i));
  }
  for (std::size_t i = 0; i < s.user_codes.size(); ++i) {
    if (s.user_codes[i].has_value()) {
      last = std::max(last, s.user_codes[i]->cls | ((kFirstUserCode + static_cast<int>(i)) << kClassBits));
    }
  }
  return last;
}

int HandlerArg(MPI_Errhandler h, const char* fn) {
  if (Predefined(h) || UserHandler(h) != nullptr) return MPI_SUCCESS;
  return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG,
               absl::StrFormat("error handler 0x%08x is not an error handler (predefined, or made and not freed)",
                               static_cast<unsigned>(h)));
}

extern "C" {

int PMPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_set_errhandler", &rc) == nullptr) return rc;
  if (rc = HandlerArg(errhandler, "MPI_Comm_set_errhandler"); rc != MPI_SUCCESS) return rc;
  CommSlotOf(comm)->handler = errhandler;
  return MPI_SUCCESS;
}

int PMPI_Comm_get_errhandler(MPI_Comm comm, MPI_Errhandler* errhandler) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_get_errhandler", &rc) == nullptr) return rc;
  *errhandler = CommSlotOf(comm)->handler;
  return MPI_SUCCESS;
}

int PMPI_Comm_create_errhandler(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler) {
  if (comm_errhandler_fn == nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Comm_create_errhandler", MPI_ERR_ARG, "a null function");
  }
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.handlers.push_back(comm_errhandler_fn);
  *errhandler = kHandlerBase | static_cast<int>(s.handlers.size() - 1);
  return MPI_SUCCESS;
}

// A handler the program made stays usable by the communicators that hold
// it (MPI frees it once none does); its handle becomes MPI_ERRHANDLER_NULL.
// MPI-1's names of the three calls above (removed from MPI-3, kept by MPICH).
int PMPI_Errhandler_create(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler) {
  return PMPI_Comm_create_errhandler(comm_errhandler_fn, errhandler);
}

int PMPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler) {
  return PMPI_Comm_set_errhandler(comm, errhandler);
}

int PMPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler) {
  return PMPI_Comm_get_errhandler(comm, errhandler);
}

int PMPI_Errhandler_free(MPI_Errhandler* errhandler) {
  if (int rc = HandlerArg(*errhandler, "MPI_Errhandler_free"); rc != MPI_SUCCESS) return rc;
  *errhandler = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

int PMPI_Comm_call_errhandler(MPI_Comm comm, int errorcode) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_call_errhandler", &rc) == nullptr) return rc;
  const MPI_Errhandler h = CommSlotOf(comm)->handler;
  if (MPI_Comm_errhandler_function* user = UserHandler(h)) {
    MPI_Comm c = comm;
    int code = errorcode;
    user(&c, &code);
    return MPI_SUCCESS;
  }
  if (h == MPI_ERRORS_RETURN) return errorcode;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  PMPI_Error_string(errorcode, text, &len);
  std::fprintf(stderr, "cartage mpi: rank %d: MPI_Comm_call_errhandler: %s; aborting\n", S().world_rank, text);
  AbortJob(Class(errorcode));
}

int PMPI_Error_class(int errorcode, int* errorclass) {
  *errorclass = Class(errorcode);
  return MPI_SUCCESS;
}

int PMPI_Error_string(int errorcode, char* string, int* resultlen) {
  State& s = S();
  std::string text = ClassName(Class(errorcode));
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const auto i = static_cast<std::size_t>(errorcode >> kClassBits);
    const auto user = i - static_cast<std::size_t>(kFirstUserCode);
    if (i >= static_cast<std::size_t>(kFirstUserCode) && user < s.user_codes.size() &&
        s.user_codes[user].has_value()) {
      text = s.user_codes[user]->text;
    } else if (i >= 1 && i <= s.messages.size()) {
      text = s.messages[i - 1];
    }
  }
  if (text.size() > MPI_MAX_ERROR_STRING - 1) text.resize(MPI_MAX_ERROR_STRING - 1);
  std::memcpy(string, text.c_str(), text.size() + 1);
  *resultlen = static_cast<int>(text.size());
  return MPI_SUCCESS;
}

int PMPI_Add_error_class(int* errorclass) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::size_t i = Free(s.user_classes);
  if (kFirstUserClass + static_cast<int>(i) >= (1 << kClassBits)) {
    return MPI_ERR_OTHER;  // every class the code layout has room for is taken
  }
  if (i == s.user_classes.size()) s.user_classes.emplace_back();
  s.user_classes[i] = "";
  *errorclass = kFirstUserClass + static_cast<int>(i);
  return MPI_SUCCESS;
}

int PMPI_Add_error_code(int errorclass, int* errorcode) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (IsClass(s, errorclass)) {
      const std::size_t i = Free(s.user_codes);
      if (i == s.user_codes.size()) s.user_codes.emplace_back();
      s.user_codes[i] = State::AddedCode{errorclass, ""};
      *errorcode = errorclass | ((kFirstUserCode + static_cast<int>(i)) << kClassBits);
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPI_Add_error_code", MPI_ERR_ARG,
               absl::StrFormat("%d is not an error class", errorclass));
}

int PMPI_Add_error_string(int errorcode, const char* string) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (std::string* text = AddedText(s, errorcode); text != nullptr) {
      *text = string;
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPI_Add_error_string", MPI_ERR_ARG,
               absl::StrFormat("%d is not a class or code the program added", errorcode));
}

int PMPIX_Delete_error_string(int errorcode) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (std::string* text = AddedText(s, errorcode); text != nullptr) {
      text->clear();
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPIX_Delete_error_string", MPI_ERR_ARG,
               absl::StrFormat("%d is not a class or code the program added", errorcode));
}

int PMPIX_Delete_error_code(int errorcode) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto* code = CodeEntry(s, errorcode); code != nullptr) {
      code->reset();
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPIX_Delete_error_code", MPI_ERR_ARG,
               absl::StrFormat("%d is not a code the program added", errorcode));
}

int PMPIX_Delete_error_class(int errorclass) {
  State& s = S();
  std::string why;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (auto* cls = ClassEntry(s, errorclass); cls != nullptr) {
      // A class whose codes are still there stays (their class would be gone).
      const auto codes = std::count_if(s.user_codes.begin(), s.user_codes.end(),
                                       [&](const auto& c) { return c.has_value() && c->cls == errorclass; });
      if (codes == 0) {
        cls->reset();
        return MPI_SUCCESS;
      }
      why = absl::StrFormat("class %d still has %d codes (MPIX_Delete_error_code them first)", errorclass, codes);
    } else {
      why = absl::StrFormat("%d is not a class the program added", errorclass);
    }
  }
  return Error(MPI_COMM_WORLD, "MPIX_Delete_error_class", MPI_ERR_ARG, why);
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Comm_set_errhandler);
CARTAGE_MPI_ALIAS(MPI_Comm_get_errhandler);
CARTAGE_MPI_ALIAS(MPI_Comm_create_errhandler);
CARTAGE_MPI_ALIAS(MPI_Errhandler_free);
CARTAGE_MPI_ALIAS(MPI_Errhandler_create);
CARTAGE_MPI_ALIAS(MPI_Errhandler_set);
CARTAGE_MPI_ALIAS(MPI_Errhandler_get);
CARTAGE_MPI_ALIAS(MPI_Comm_call_errhandler);
CARTAGE_MPI_ALIAS(MPI_Error_class);
CARTAGE_MPI_ALIAS(MPI_Error_string);
CARTAGE_MPI_ALIAS(MPI_Add_error_class);
CARTAGE_MPI_ALIAS(MPI_Add_error_code);
CARTAGE_MPI_ALIAS(MPI_Add_error_string);
CARTAGE_MPI_ALIAS(MPIX_Delete_error_string);
CARTAGE_MPI_ALIAS(MPIX_Delete_error_code);
CARTAGE_MPI_ALIAS(MPIX_Delete_error_class);

// The MPI binding's error handling: a communicator's handler (fatal by
// default, MPI_ERRORS_RETURN, MPI_ERRORS_ABORT, or one the program made),
// error classes and codes, and the classes, codes and texts a program
// adds. handles.cc's Error() runs the handler; the texts of the codes it
// makes carry cartage's messages.
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

}  // namespace

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
    if (i >= static_cast<std::size_t>(kFirstUserCode) && user < s.user_codes.size()) {
      text = s.user_codes[user];
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
  if (kFirstUserClass + static_cast<int>(s.user_classes.size()) >= (1 << kClassBits)) {
    return MPI_ERR_OTHER;  // every class the code layout has room for is taken
  }
  s.user_classes.emplace_back();
  *errorclass = kFirstUserClass + static_cast<int>(s.user_classes.size()) - 1;
  return MPI_SUCCESS;
}

int PMPI_Add_error_code(int errorclass, int* errorcode) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const bool added = errorclass >= kFirstUserClass &&
                       errorclass < kFirstUserClass + static_cast<int>(s.user_classes.size());
    if (added || (errorclass >= 0 && errorclass < kFirstUserClass)) {
      s.user_codes.emplace_back();
      *errorcode = errorclass | ((kFirstUserCode + static_cast<int>(s.user_codes.size()) - 1) << kClassBits);
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
    const int cls = Class(errorcode);
    const int index = errorcode >> kClassBits;
    if (index == 0 && cls >= kFirstUserClass &&
        static_cast<std::size_t>(cls - kFirstUserClass) < s.user_classes.size()) {
      s.user_classes[static_cast<std::size_t>(cls - kFirstUserClass)] = string;
      return MPI_SUCCESS;
    }
    const auto user = static_cast<std::size_t>(index - kFirstUserCode);
    if (index >= kFirstUserCode && user < s.user_codes.size()) {
      s.user_codes[user] = string;
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPI_Add_error_string", MPI_ERR_ARG,
               absl::StrFormat("%d is not a class or code the program added", errorcode));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Comm_set_errhandler);
CARTAGE_MPI_ALIAS(MPI_Comm_get_errhandler);
CARTAGE_MPI_ALIAS(MPI_Comm_create_errhandler);
CARTAGE_MPI_ALIAS(MPI_Errhandler_free);
CARTAGE_MPI_ALIAS(MPI_Comm_call_errhandler);
CARTAGE_MPI_ALIAS(MPI_Error_class);
CARTAGE_MPI_ALIAS(MPI_Error_string);
CARTAGE_MPI_ALIAS(MPI_Add_error_class);
CARTAGE_MPI_ALIAS(MPI_Add_error_code);
CARTAGE_MPI_ALIAS(MPI_Add_error_string);

// Which method carries each peer's traffic: the methods CARTAGE_METHODS
// chooses, opened in order, and for every world rank the first of them that
// reaches it, with that method's VC and the limits of its envelope. Also
// which methods progress polls every round (those some peer goes through)
// and which only now and then, and the method that matches envelopes
// itself, if one does.
#ifndef CARTAGE_AGENT_ROUTES_H_
#define CARTAGE_AGENT_ROUTES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/registry.h"

namespace cartage::agent {

class Routes {
 public:
  // What carries one peer.
  struct Route {
    methods::Method* method = nullptr;
    car::Vc* vc = nullptr;
    uint64_t eager_limit = 0;
    uint64_t max_context = UINT64_MAX;  // what its envelope can name (CheckEnvelope)
    int64_t max_tag = INT64_MAX;
  };

  // Opens the chosen methods over `exchange` (every rank opens the same list
  // in the same order, so their exchanges and fences line up) and routes
  // every rank of a job of `size`. `any_vc` is the agent's VC for a wildcard
  // receive before it matches; a method that matches envelopes itself
  // replaces it with its own.
  absl::Status Open(methods::Exchange& exchange, methods::MethodHost& host, int size, car::Vc* any_vc);
  // Closes every method (after the job's last fence).
  void CloseAll();

  const Route& Of(int peer) const { return routes_[static_cast<std::size_t>(peer)]; }
  methods::Method& MethodFor(int peer) const { return *Of(peer).method; }
  // The VC of the method that reaches world rank `peer` (-1: not known yet,
  // a wildcard receive, rebound when it matches).
  const car::Vc* VcFor(int peer) const { return peer < 0 ? any_vc_ : Of(peer).vc; }
  // Whether the method that reaches `peer` (-1: any) can name `context` and
  // `tag` in its envelope (ofi's tag layouts cannot name all).
  bool EnvelopeFits(int peer, uint32_t context, int tag) const {
    const Route& r = peer >= 0 ? Of(peer) : any_route_;
    return context <= r.max_context && tag <= r.max_tag;
  }
  // EnvelopeFits' answer as an error naming the limit (OK if it fits).
  absl::Status CheckEnvelope(int peer, uint32_t context, int tag) const;

  // The methods opened, in order of preference.
  const std::vector<std::unique_ptr<methods::Method>>& methods() const { return methods_; }
  // Those some peer goes through (polled every round), the only one of
  // them if there is one, and the rest (polled now and then).
  const std::vector<methods::Method*>& polled() const { return polled_; }
  methods::Method* sole() const { return sole_; }
  const std::vector<methods::Method*>& idle() const { return idle_; }
  // The method that matches envelopes itself, if any.
  methods::Method* native() const { return native_; }
  // The largest finite eager limit of the methods in use (0: none).
  uint64_t largest_eager_limit() const;
  // The most per-CAR bytes any method keeps in a CAR's private area.
  std::size_t private_bytes() const;

  // Binds `car` to the method that reaches `peer` (a wildcard receive: to
  // the method that matches everything, if one does).
  void Bind(car::Car& car, int peer) const;
  // Persistent requests: registers a buffer with the method that reaches
  // `peer` (-1: the first method polled); the token names the method too.
  absl::StatusOr<uint64_t> Register(int peer, const void* buf, std::size_t bytes);
  void Unregister(uint64_t token);
  int registered() const;

 private:
  std::unique_ptr<methods::Registry> registry_;            // keeps plugin libraries loaded
  std::vector<std::unique_ptr<methods::Method>> methods_;  // opened, in order of preference
  std::vector<Route> routes_;
  std::vector<methods::Method*> polled_;
  methods::Method* sole_ = nullptr;
  std::vector<methods::Method*> idle_;
  const car::Vc* any_vc_ = nullptr;
  methods::Method* native_ = nullptr;
  Route any_route_;  // wildcard receives: the native matcher's limits, if any
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_ROUTES_H_

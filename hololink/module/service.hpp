/* hololink/module/service.hpp: ServiceBase, Service<T> and ConfigurableService<T>, the service
 * machinery of Holoscan Sensor Bridge's module API (seed: hololink::module::
 * RoceReceiverInterfaceV1 inherits ConfigurableService<RoceReceiverInterfaceV1>; Holoscan Sensor
 * Bridge hololink_module/host/include/hololink/module/service.hpp).
 *
 * A service class T supplies `static constexpr const char *type_id`, and optionally
 * `using ServiceAlias = <the class it implements>` to be found under that class's type_id too
 * (an implementation names its interface).  A ConfigurableService also supplies
 * `static std::string locator_id(const EnumerationMetadata &)`, the instance id that metadata
 * designates, and overrides configure().
 *
 * Semantics (the seed's):
 *   - ServiceBase::module(): the Module the service was published from; the service holds it
 *     weakly, so this is empty when the service was never published or the Module is gone.
 *   - Service<T>::for_each_type_id(cb): cb(type_id) for every type id T is published under,
 *     depth first, the most specific first (T's own, then its ServiceAlias's, ...); stops at the
 *     first cb that returns false and then returns false (true when the walk completed).
 *   - ConfigurableService<T>::get_service(metadata, allow_null): the instance
 *     T::locator_id(metadata) of the default Module (service_module.hpp), constructed on first
 *     use; configure(metadata) runs exactly once per instance, on its first get_service(metadata),
 *     even when several threads ask at once (they wait for it); if configure throws, the exception
 *     reaches that caller and the next get_service(metadata) configures again.  No such
 *     service: an empty pointer when allow_null, else std::runtime_error.
 * Thread rules: get_service and module() may be called from any thread. */
#ifndef MLX5DIRECT_HOLOLINK_SERVICE_HPP
#define MLX5DIRECT_HOLOLINK_SERVICE_HPP

#include "mlx5direct_guard.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "enumeration_metadata.hpp"
#include "module.hpp"

namespace hololink::module {
inline namespace mlx5direct {

class ServiceModule;

/* One per service object (Service<T> inherits it virtually, so a class with several Service<T>
 * bases still has one). */
class ServiceBase {
public:
    std::shared_ptr<Module> module() const { return module_.lock(); }

protected:
    ServiceBase() = default;
    ~ServiceBase() = default;
    ServiceBase(const ServiceBase &) = default;
    ServiceBase &operator=(const ServiceBase &) = default;

private:
    friend class ServiceModule;           /* stamps module_ when it publishes the service */
    std::weak_ptr<Module> module_;
};

namespace detail {
template <typename T, typename = void>
struct has_service_alias : std::false_type {};
template <typename T>
struct has_service_alias<T, std::void_t<typename T::ServiceAlias>> : std::true_type {};

/* The default Module's lookup behind ConfigurableService<T>::get_service(metadata)
 * (src/service_module.cpp). */
std::shared_ptr<const void> default_module_service(const std::string &instance_id,
                                                   const char *type_id, bool allow_null);
} // namespace detail

template <typename Derived>
class Service : public virtual ServiceBase {
public:
    /* The service (instance_id, Derived::type_id) of module.  module empty or no such service:
     * an empty pointer when allow_null, else std::runtime_error. */
    static std::shared_ptr<Derived> get_service(std::shared_ptr<Module> module,
                                                const char *instance_id, bool allow_null = false)
    {
        if (!module) {
            if (allow_null)
                return {};
            throw std::runtime_error(std::string("get_service(") + Derived::type_id +
                                     "): no module (empty pointer)");
        }
        std::shared_ptr<const void> p = module->get_service(instance_id, Derived::type_id, allow_null);
        return typed(std::move(p));
    }

    template <typename Callback>
    static bool for_each_type_id(Callback &&cb)
    {
        if (!cb(static_cast<const char *>(Derived::type_id)))
            return false;
        if constexpr (detail::has_service_alias<Derived>::value)
            return Derived::ServiceAlias::for_each_type_id(std::forward<Callback>(cb));
        else
            return true;
    }

protected:
    Service() = default;
    ~Service() = default;
    Service(const Service &) = default;
    Service &operator=(const Service &) = default;

    /* The Module stores the object's Derived* (ServiceModule::publish); share its ownership. */
    static std::shared_ptr<Derived> typed(std::shared_ptr<const void> p)
    {
        if (!p)
            return {};
        auto *d = const_cast<Derived *>(static_cast<const Derived *>(p.get()));
        return std::shared_ptr<Derived>(std::move(p), d);
    }
};

template <typename Derived>
class ConfigurableService : public Service<Derived> {
public:
    using Service<Derived>::get_service;

    static std::shared_ptr<Derived> get_service(const EnumerationMetadata &metadata,
                                                bool allow_null = false)
    {
        std::shared_ptr<Derived> s = Service<Derived>::typed(detail::default_module_service(
            Derived::locator_id(metadata), Derived::type_id, allow_null));
        if (s)
            s->ensure_configured(metadata);
        return s;
    }

    /* Runs configure(metadata) if it has not completed on this instance yet (exactly once;
     * concurrent callers wait for it).  A latch of its own rather than std::call_once, whose
     * exceptional path leaves the flag locked for ever under ThreadSanitizer's pthread_once. */
    virtual void ensure_configured(const EnumerationMetadata &metadata)
    {
        if (configured_.load(std::memory_order_acquire))
            return;
        std::lock_guard<std::mutex> g(configure_lock_);
        if (configured_.load(std::memory_order_relaxed))
            return;
        this->configure(metadata);          /* throws: not configured, the next call retries */
        configured_.store(true, std::memory_order_release);
    }

    /* Use metadata to initialise this instance.  Called through get_service(metadata) only,
     * exactly once per instance.  The default does nothing. */
    virtual void configure(const EnumerationMetadata &) {}

protected:
    ConfigurableService() = default;
    ~ConfigurableService() = default;
    ConfigurableService(const ConfigurableService &) = delete;
    ConfigurableService &operator=(const ConfigurableService &) = delete;

private:
    std::mutex configure_lock_;
    std::atomic<bool> configured_{false};
};

} // namespace mlx5direct
} // namespace hololink::module

#endif

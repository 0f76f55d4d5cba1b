/* hololink/module/service_module.hpp: ServiceModule, this library's Module: a registry of
 * published services plus constructors for the types it can make on a miss; and the process's
 * default Module.
 *
 *   auto m = hololink::module::ServiceModule::create();
 *   m->publish("my-id", std::make_shared<MyService>());   // found under every type id of its chain
 *   m->add_factory<MyService>();                          // or: made on the first get_service
 *   hololink::module::set_default_module(m);              // used by get_service(metadata)
 *
 * The default Module: until set_default_module() is called, the first
 * ConfigurableService<T>::get_service(metadata) makes one that constructs
 * Mlx5DirectRoceReceiverV1 for "roce_receiver.v1" (mlx5direct_roce_receiver.hpp).
 * The module holds its services; a service refers to its module weakly (ServiceBase::module()),
 * and the pointers get_service returns do not keep the module alive.
 * Errors: std::runtime_error naming the ids.  Thread rules: every call may be made from any
 * thread (one mutex per module); publish a service before handing it to other threads. */
#ifndef MLX5DIRECT_HOLOLINK_SERVICE_MODULE_HPP
#define MLX5DIRECT_HOLOLINK_SERVICE_MODULE_HPP

#include "mlx5direct_guard.hpp"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "module.hpp"
#include "service.hpp"

namespace hololink::module {
inline namespace mlx5direct {

class ServiceModule : public Module {
public:
    static std::shared_ptr<ServiceModule> create();

    /* Publishes service under instance_id for every type id of T's chain (T's own, its
     * ServiceAlias's, ...) and makes its module() this module.  An id already taken is replaced.
     * Throws std::invalid_argument on an empty service. */
    template <typename T>
    void publish(const std::string &instance_id, std::shared_ptr<T> service)
    {
        if (!service)
            throw std::invalid_argument("ServiceModule::publish(" + instance_id + "): empty service");
        Entries e;
        chain<T>(e, service);
        std::lock_guard<std::mutex> g(lock_);
        stamp(*service);
        insert(instance_id, e);
    }

    /* On a miss for any type id of T's chain, get_service makes std::make_shared<T>() and
     * publishes it under the instance id asked for. */
    template <typename T>
    void add_factory()
    {
        Factory f = [this](const std::string &id) {
            auto s = std::make_shared<T>();
            Entries e;
            chain<T>(e, s);
            stamp(*s);
            insert(id, e);
        };
        std::lock_guard<std::mutex> g(lock_);
        T::for_each_type_id([&](const char *type_id) {
            factories_[type_id] = f;
            return true;
        });
    }

    /* Drops the service (instance_id, every type id); its holders keep it, module() becomes empty
     * for it only when the module goes.  Returns whether it was there. */
    bool unpublish(const std::string &instance_id);

    std::shared_ptr<const void> get_service(const char *instance_id, const char *type_id,
                                            bool allow_null = false) override;

protected:
    ServiceModule() = default;

private:
    using Entries = std::vector<std::pair<std::string, std::shared_ptr<const void>>>;
    using Factory = std::function<void(const std::string &)>;

    template <typename T>
    static void chain(Entries &e, const std::shared_ptr<T> &p)
    {
        e.emplace_back(T::type_id, std::static_pointer_cast<const void>(p));
        if constexpr (detail::has_service_alias<T>::value)
            chain<typename T::ServiceAlias>(
                e, std::static_pointer_cast<typename T::ServiceAlias>(p));
    }
    void stamp(ServiceBase &s) { s.module_ = std::static_pointer_cast<Module>(shared_from_this()); }
    void insert(const std::string &instance_id, const Entries &e);

    std::mutex lock_;
    std::map<std::pair<std::string, std::string>, std::shared_ptr<const void>> services_;
    std::map<std::string, Factory> factories_;
};

/* The process's default Module (made on first use, see above). */
std::shared_ptr<Module> default_module();
/* Replaces it (an empty pointer: the next default_module() makes a fresh one).  The old one is
 * released: services of it that are still held stay usable, and their module() is empty once
 * nothing else holds it. */
void set_default_module(std::shared_ptr<Module> module);

} // namespace mlx5direct
} // namespace hololink::module

#endif

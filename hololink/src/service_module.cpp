/* ServiceModule and the process's default Module (hololink/module/service_module.hpp). */
#include "hololink/module/service_module.hpp"

#include "hololink/module/mlx5direct_roce_receiver.hpp"

namespace hololink::module {
inline namespace mlx5direct {

namespace {
/* make_shared needs a public constructor; ServiceModule's is protected so that every module is
 * owned by a shared_ptr (shared_from_this, weak references from its services). */
struct MadeModule : ServiceModule {};

std::mutex default_lock;
std::shared_ptr<Module> default_instance;
} // namespace

std::shared_ptr<ServiceModule> ServiceModule::create()
{
    return std::make_shared<MadeModule>();
}

void ServiceModule::insert(const std::string &instance_id, const Entries &e)
{
    for (const auto &[type_id, p] : e)
        services_[{instance_id, type_id}] = p;
}

bool ServiceModule::unpublish(const std::string &instance_id)
{
    std::lock_guard<std::mutex> g(lock_);
    bool found = false;
    for (auto it = services_.lower_bound({instance_id, ""});
         it != services_.end() && it->first.first == instance_id;) {
        it = services_.erase(it);
        found = true;
    }
    return found;
}

std::shared_ptr<const void> ServiceModule::get_service(const char *instance_id, const char *type_id,
                                                       bool allow_null)
{
    std::string id = instance_id ? instance_id : "";
    std::string type = type_id ? type_id : "";
    std::lock_guard<std::mutex> g(lock_);
    auto it = services_.find({id, type});
    if (it == services_.end()) {
        auto f = factories_.find(type);
        if (f != factories_.end()) {
            f->second(id);
            it = services_.find({id, type});
        }
    }
    if (it != services_.end())
        return it->second;
    if (allow_null)
        return {};
    throw std::runtime_error("get_service: no service of type '" + type + "' for instance '" + id +
                             "' in this module, and no constructor for that type");
}

std::shared_ptr<Module> default_module()
{
    std::lock_guard<std::mutex> g(default_lock);
    if (!default_instance) {
        auto m = ServiceModule::create();
        m->add_factory<Mlx5DirectRoceReceiverV1>();
        default_instance = m;
    }
    return default_instance;
}

void set_default_module(std::shared_ptr<Module> module)
{
    std::shared_ptr<Module> old;
    {
        std::lock_guard<std::mutex> g(default_lock);
        old = std::move(default_instance);
        default_instance = std::move(module);
    }
    /* old (and the services only it held) is released here, outside the lock */
}

namespace detail {
std::shared_ptr<const void> default_module_service(const std::string &instance_id,
                                                   const char *type_id, bool allow_null)
{
    return default_module()->get_service(instance_id.c_str(), type_id, allow_null);
}
} // namespace detail

} // namespace mlx5direct
} // namespace hololink::module

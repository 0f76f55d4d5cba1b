/* The service machinery of the seed (hololink/module/service.hpp, service_module.hpp,
 * enumeration_metadata.hpp): configure exactly once, get_service and allow_null,
 * for_each_type_id's order and stop, module() held weakly, and the enumeration metadata keys
 * that configure the mlx5direct receiver. */
#include "hl_util.hpp"

#include <vector>

namespace {

std::atomic<int> configured{0};

/* A configurable service: instance = metadata "name"; counts configure calls. */
class Counted : public hl::ConfigurableService<Counted> {
public:
    static constexpr const char *type_id = "test.counted.v1";
    static std::string locator_id(const hl::EnumerationMetadata &md)
    {
        return md.get<std::string>("name", "x");
    }
    void configure(const hl::EnumerationMetadata &md) override
    {
        configured++;
        if (md.get<int64_t>("fail", 0) && configured == 1)
            throw std::runtime_error("configure failed on purpose");
        name = md.get<std::string>("name", "x");
    }
    std::string name;
};

/* A chain: Leaf implements Mid implements Root. */
class Root : public hl::Service<Root> {
public:
    static constexpr const char *type_id = "test.root.v1";
    virtual ~Root() = default;
};
class Mid : public Root, public hl::Service<Mid> {
public:
    static constexpr const char *type_id = "test.mid.v1";
    using ServiceAlias = Root;
    using hl::Service<Mid>::for_each_type_id;
    using hl::Service<Mid>::get_service;
};
class Leaf : public Mid, public hl::Service<Leaf> {
public:
    static constexpr const char *type_id = "test.leaf.v1";
    using ServiceAlias = Mid;
    using hl::Service<Leaf>::for_each_type_id;
    using hl::Service<Leaf>::get_service;
};

template <typename T>
std::vector<std::string> walk(int stop_after, bool *completed)
{
    std::vector<std::string> seen;
    *completed = T::for_each_type_id([&](const char *id) {
        seen.emplace_back(id);
        return (int)seen.size() != stop_after;
    });
    return seen;
}

} // namespace

START_TEST(configure_exactly_once)
{
    configured = 0;
    auto m = hl::ServiceModule::create();
    m->add_factory<Counted>();
    hl::set_default_module(m);
    hl::EnumerationMetadata md;
    md["name"] = std::string("a");
    std::shared_ptr<Counted> first = Counted::get_service(md);
    ck_assert_ptr_nonnull(first.get());
    /* 8 threads resolve the same instance at once, 50 times each */
    std::vector<std::thread> t;
    std::atomic<int> same{0};
    for (int i = 0; i < 8; i++)
        t.emplace_back([&] {
            for (int k = 0; k < 50; k++)
                same += Counted::get_service(md).get() == first.get();
        });
    for (auto &th : t)
        th.join();
    ck_assert_int_eq(same, 400);
    ck_assert_int_eq(configured, 1);
    HL_STR_EQ(first->name, "a");
    /* another instance is configured once too */
    hl::EnumerationMetadata md2;
    md2["name"] = std::string("b");
    auto second = Counted::get_service(md2);
    ck_assert_ptr_ne(second.get(), first.get());
    Counted::get_service(md2);
    ck_assert_int_eq(configured, 2);
    hl::set_default_module(nullptr);
}
END_TEST

/* A configure that throws: that get_service throws, the next one configures again. */
START_TEST(configure_throwing_is_retried)
{
    configured = 0;
    auto m = hl::ServiceModule::create();
    m->add_factory<Counted>();
    hl::set_default_module(m);
    hl::EnumerationMetadata md;
    md["name"] = std::string("f");
    md["fail"] = int64_t(1);
    HL_THROWS_EXACTLY(Counted::get_service(md), "configure failed on purpose");
    auto s = Counted::get_service(md);
    ck_assert_int_eq(configured, 2);
    HL_STR_EQ(s->name, "f");
    Counted::get_service(md);
    ck_assert_int_eq(configured, 2);
    hl::set_default_module(nullptr);
}
END_TEST

START_TEST(get_service_allow_null)
{
    auto m = hl::ServiceModule::create();            /* no factory: nothing can be made */
    hl::set_default_module(m);
    hl::EnumerationMetadata md;
    md["name"] = std::string("n");
    ck_assert_ptr_null(Counted::get_service(md, true).get());
    HL_THROWS_EXACTLY(Counted::get_service(md),
                      "get_service: no service of type 'test.counted.v1' for instance 'n' in this "
                      "module, and no constructor for that type");
    ck_assert_ptr_null(Counted::get_service(nullptr, "n", true).get());
    HL_THROWS_EXACTLY(Counted::get_service(nullptr, "n"),
                      "get_service(test.counted.v1): no module (empty pointer)");
    ck_assert_ptr_null(Counted::get_service(m, "n", true).get());
    /* published: found by either form */
    auto s = std::make_shared<Counted>();
    m->publish("n", s);
    ck_assert_ptr_eq(Counted::get_service(m, "n").get(), s.get());
    ck_assert_ptr_eq(Counted::get_service(md).get(), s.get());
    ck_assert(m->unpublish("n"));
    ck_assert(!m->unpublish("n"));
    ck_assert_ptr_null(Counted::get_service(md, true).get());
    hl::set_default_module(nullptr);
}
END_TEST

START_TEST(for_each_type_id_order_and_stop)
{
    bool done;
    auto all = walk<Leaf>(0, &done);
    ck_assert(done);
    ck_assert_uint_eq(all.size(), 3);
    HL_STR_EQ(all[0], "test.leaf.v1");       /* most specific first */
    HL_STR_EQ(all[1], "test.mid.v1");
    HL_STR_EQ(all[2], "test.root.v1");
    auto two = walk<Leaf>(2, &done);
    ck_assert(!done);
    ck_assert_uint_eq(two.size(), 2);
    HL_STR_EQ(two[1], "test.mid.v1");
    auto one = walk<Leaf>(1, &done);
    ck_assert(!done);
    ck_assert_uint_eq(one.size(), 1);
    auto rx = walk<hl::Mlx5DirectRoceReceiverV1>(0, &done);
    ck_assert(done);
    ck_assert_uint_eq(rx.size(), 2);
    HL_STR_EQ(rx[0], "roce_receiver.mlx5direct.v1");
    HL_STR_EQ(rx[1], "roce_receiver.v1");
    auto iface = walk<hl::RoceReceiverInterfaceV1>(0, &done);
    ck_assert(done);
    ck_assert_uint_eq(iface.size(), 1);
    HL_STR_EQ(iface[0], "roce_receiver.v1");
}
END_TEST

/* Publishing under the whole chain: each type id gives the object as that type. */
START_TEST(publish_chain)
{
    auto m = hl::ServiceModule::create();
    auto leaf = std::make_shared<Leaf>();
    m->publish("i", leaf);
    ck_assert_ptr_eq(Leaf::get_service(m, "i").get(), leaf.get());
    ck_assert_ptr_eq(Mid::get_service(m, "i").get(), static_cast<Mid *>(leaf.get()));
    ck_assert_ptr_eq(Root::get_service(m, "i").get(), static_cast<Root *>(leaf.get()));
    m->add_factory<hl::Mlx5DirectRoceReceiverV1>();
    auto by_iface = hl::RoceReceiverInterfaceV1::get_service(m, "r");
    auto by_impl = hl::Mlx5DirectRoceReceiverV1::get_service(m, "r");
    ck_assert_ptr_eq(by_iface.get(), static_cast<hl::RoceReceiverInterfaceV1 *>(by_impl.get()));
    ck_assert_ptr_eq(by_impl->module().get(), m.get());
}
END_TEST

START_TEST(module_is_weak)
{
    auto m = hl::ServiceModule::create();
    auto s = std::make_shared<Leaf>();
    ck_assert_ptr_null(s->module().get());           /* never published */
    m->publish("w", s);
    ck_assert_ptr_eq(s->module().get(), m.get());
    ck_assert_int_eq(m.use_count(), 1);              /* the service holds no strong reference */
    std::weak_ptr<hl::Module> alive = m;
    m.reset();                                       /* the Module is destroyed */
    ck_assert(alive.expired());
    ck_assert_ptr_null(s->module().get());
    /* the receiver from the default module: module() empty once that module is gone */
    hl::set_default_module(nullptr);
    hl::EnumerationMetadata md;
    md["serial_number"] = std::string("weak");
    auto rx = hl::RoceReceiverInterfaceV1::get_service(md);
    ck_assert_ptr_nonnull(rx->module().get());
    ck_assert_ptr_eq(rx->module().get(), hl::default_module().get());
    hl::set_default_module(nullptr);
    ck_assert_ptr_null(rx->module().get());
    ck_assert_uint_eq(rx->frame_size(), 0);          /* the service itself lives on */
    ck_assert(!rx->frames_ready());
}
END_TEST

START_TEST(metadata_access)
{
    hl::EnumerationMetadata md;
    md["peer_ip"] = std::string("192.168.0.2");
    md["data_channel"] = int64_t(1);
    ck_assert(md.contains("peer_ip"));
    ck_assert(!md.contains("mtu"));
    HL_STR_EQ(md.get<std::string>("peer_ip"), "192.168.0.2");
    ck_assert_int_eq(md.get<int64_t>("mtu", 1500), 1500);
    ck_assert_int_eq(md.get<int64_t>("peer_ip", 7), 7);       /* wrong type: the default */
    HL_THROWS_EXACTLY(md.get<int64_t>("mtu"), "EnumerationMetadata: no key 'mtu'");
    HL_THROWS_EXACTLY(md.get<int64_t>("peer_ip"),
                      "EnumerationMetadata: key 'peer_ip' holds a value of another type");
    std::string id = hl::RoceReceiverInterfaceV1::locator_id(md);
    HL_STR_EQ(id, "serial=;data_channel=1");
    md["serial_number"] = std::string("1234");
    id = hl::RoceReceiverInterfaceV1::locator_id(md);
    HL_STR_EQ(id, "serial=1234;data_channel=1");
}
END_TEST

static hl::EnumerationMetadata rx_md(const char *serial)
{
    hl::EnumerationMetadata md;
    md["serial_number"] = std::string(serial);
    md["data_channel"] = int64_t(0);
    return md;
}

START_TEST(metadata_configures_receiver)
{
    hl::set_default_module(nullptr);
    auto md = rx_md("cfg");
    md["ibv_name"] = std::string("mlx5_1");
    md["ibv_port"] = int64_t(1);
    md["peer_ip"] = std::string("127.0.0.2");
    md["receiver_mode"] = std::string("busy_poll");
    md["hsb_ip_version"] = int64_t(0x2510);
    auto rx = hl::Mlx5DirectRoceReceiverV1::get_service(md);
    HL_STR_EQ(rx->configured_ibv_name(), "mlx5_1");
    ck_assert_uint_eq(rx->configured_ibv_port(), 1);
    HL_STR_EQ(rx->configured_peer_ip(), "127.0.0.2");
    ck_assert(rx->options().mode == hl::Mlx5DirectRoceReceiverV1::Mode::busy_poll);
    ck_assert_int_eq(rx->options().imm_layout, MLXD_HSB_IMM_LEGACY_8_24);
    /* the same instance through the interface; configure does not run again */
    auto other = rx_md("cfg");
    other["receiver_mode"] = std::string("event");
    auto again = hl::RoceReceiverInterfaceV1::get_service(other);
    ck_assert_ptr_eq(again.get(), static_cast<hl::RoceReceiverInterfaceV1 *>(rx.get()));
    ck_assert(rx->options().mode == hl::Mlx5DirectRoceReceiverV1::Mode::busy_poll);
    /* defaults: event mode, the 12/20 immediate (IP version 0x2603 and later) */
    auto plain = rx_md("plain");
    plain["hsb_ip_version"] = int64_t(0x2603);
    auto p = hl::Mlx5DirectRoceReceiverV1::get_service(plain);
    ck_assert(p->options().mode == hl::Mlx5DirectRoceReceiverV1::Mode::event);
    ck_assert_int_eq(p->options().imm_layout, MLXD_HSB_IMM_12_20);
    HL_STR_EQ(p->configured_ibv_name(), "");
    /* bad values: get_service throws naming the key */
    auto bad = rx_md("bad1");
    bad["receiver_mode"] = std::string("fast");
    HL_THROWS_EXACTLY(hl::RoceReceiverInterfaceV1::get_service(bad),
                      "Mlx5DirectRoceReceiverV1::configure: receiver_mode 'fast' is not \"event\" or "
                      "\"busy_poll\"");
    bad = rx_md("bad2");
    bad["ibv_port"] = std::string("1");
    HL_THROWS_EXACTLY(hl::RoceReceiverInterfaceV1::get_service(bad),
                      "EnumerationMetadata: key 'ibv_port' holds a value of another type");
    bad = rx_md("bad3");
    bad["ibv_port"] = int64_t(2);
    HL_THROWS_EXACTLY(hl::RoceReceiverInterfaceV1::get_service(bad),
                      "Mlx5DirectRoceReceiverV1::configure: ibv_port 2 is not 0 or 1");
    bad = rx_md("bad4");
    bad["hsb_ip_version"] = int64_t(-1);
    HL_THROWS_EXACTLY(hl::RoceReceiverInterfaceV1::get_service(bad),
                      "Mlx5DirectRoceReceiverV1::configure: hsb_ip_version -1 is outside 0..0xFFFF");
    hl::set_default_module(nullptr);
}
END_TEST

Suite *hololink_service_suite(void)
{
    Suite *s = suite_create("hololink_service");
#define CASE(fn) do { TCase *tc = tcase_create(#fn); tcase_set_timeout(tc, 60); \
                      tcase_add_test(tc, fn); suite_add_tcase(s, tc); } while (0)
    CASE(configure_exactly_once);
    CASE(configure_throwing_is_retried);
    CASE(get_service_allow_null);
    CASE(for_each_type_id_order_and_stop);
    CASE(publish_chain);
    CASE(module_is_weak);
    CASE(metadata_access);
    CASE(metadata_configures_receiver);
#undef CASE
    return s;
}

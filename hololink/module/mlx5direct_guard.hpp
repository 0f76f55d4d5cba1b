/* hololink/module/mlx5direct_guard.hpp: included first by every C++ header of
 * mlx5direct-hololink.
 *
 * mlx5direct-hololink defines the classes of Holoscan Sensor Bridge's module API
 * (hololink::module::ServiceBase, Service, ConfigurableService, EnumerationMetadata, Module,
 * RoceReceiverInterfaceV1, RoceReceiverFrameInfoV1) itself, inside the inline namespace
 * hololink::module::mlx5direct: source code names them exactly as with Holoscan Sensor Bridge,
 * while their link names differ, so a program can never hold two definitions of one class.
 * A file that includes Holoscan Sensor Bridge's own headers and these is refused at compile time:
 * here when Holoscan Sensor Bridge's header came first (its include guards are defined), and as
 * an ambiguous name when it comes second.  See docs/hololink.md, "Coexistence". */
#ifndef MLX5DIRECT_HOLOLINK_GUARD_HPP
#define MLX5DIRECT_HOLOLINK_GUARD_HPP

#if __cplusplus < 201703L
#error "mlx5direct-hololink needs C++17 (-std=c++17)"
#endif

/* The include guards of Holoscan Sensor Bridge's hololink_module/host/include/hololink/module/
 * headers of the same names. */
#if defined(HOLOLINK_MODULE_ROCE_RECEIVER_HPP) || defined(HOLOLINK_MODULE_SERVICE_HPP) || \
    defined(HOLOLINK_MODULE_BASE_HPP) || defined(HOLOLINK_MODULE_ENUMERATION_METADATA_HPP)
#error "mlx5direct-hololink: Holoscan Sensor Bridge's own hololink/module headers are already included in this file; use one implementation of hololink::module per program (docs/hololink.md, Coexistence)"
#endif

#endif

/* hololink/module/enumeration_metadata.hpp: the key/value description of a sensor-bridge
 * channel that enumeration produces and services are configured from.
 *
 * As in Holoscan Sensor Bridge (hololink_module/host/include/hololink/module/
 * enumeration_metadata.hpp): a std::map from key to a value that is an int64_t, a string or a
 * byte blob, with contains() and typed get().  The keys the mlx5direct receiver reads are listed
 * in mlx5direct_roce_receiver.hpp and docs/hololink.md.
 * Thread rules: those of std::map (concurrent reads are safe). */
#ifndef MLX5DIRECT_HOLOLINK_ENUMERATION_METADATA_HPP
#define MLX5DIRECT_HOLOLINK_ENUMERATION_METADATA_HPP

#include "mlx5direct_guard.hpp"

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace hololink::module {
inline namespace mlx5direct {

class EnumerationMetadata
    : public std::map<std::string, std::variant<int64_t, std::string, std::vector<uint8_t>>> {
public:
    using Value = mapped_type;

    /* Whether key is present, whatever its type (std::map::contains is C++20). */
    bool contains(const std::string &key) const { return count(key) != 0; }

    /* The value of key as T.  Throws std::runtime_error naming the key when it is absent or
     * holds another type. */
    template <typename T>
    T get(const std::string &key) const
    {
        auto it = find(key);
        if (it == end())
            throw std::runtime_error("EnumerationMetadata: no key '" + key + "'");
        if (!std::holds_alternative<T>(it->second))
            throw std::runtime_error("EnumerationMetadata: key '" + key +
                                     "' holds a value of another type");
        return std::get<T>(it->second);
    }

    /* The value of key as T, or fallback when it is absent or holds another type. */
    template <typename T>
    T get(const std::string &key, const T &fallback) const
    {
        auto it = find(key);
        if (it == end() || !std::holds_alternative<T>(it->second))
            return fallback;
        return std::get<T>(it->second);
    }
};

} // namespace mlx5direct
} // namespace hololink::module

#endif

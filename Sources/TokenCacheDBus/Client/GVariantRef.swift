internal import CLibSecret
import FoundationEssentials

/// One owned reference to a GVariant value: taken (or sunk, for a floating value) when the
/// wrapper is made and released in `deinit`, the way GRDB's `Statement` owns its sqlite3_stmt.
///
/// The Secret Service client builds its arguments and reads its replies through this type only,
/// so no code in the client or the backend ever pairs a `g_variant_unref` with a value by hand.
/// Builders cover the few shapes the Secret Service takes (`s`, `o`, `b`, `a{ss}`, `ao`, the
/// item properties `a{sv}`, tuples); readers return Swift values, or nil for another type.
/// GVariant values are immutable and their reference counts atomic, hence Sendable.
package final class GVariantRef: @unchecked Sendable {
    // @unchecked: an immutable pointer to an immutable, atomically counted GVariant.
    /// The value, for a C call that borrows it (the wrapper keeps it alive meanwhile).
    package let pointer: OpaquePointer

    /// Owns `value`: sinks a floating reference (a `g_variant_new_*` result), or adds a reference
    /// to a value borrowed from someone else (a reply GDBus frees after the call).
    package init(sinking value: OpaquePointer) {
        pointer = g_variant_ref_sink(value)
    }

    /// Owns `value`, a full reference already handed to the caller (`g_variant_get_child_value`,
    /// `g_dbus_connection_call_finish`): nothing to add.
    package init(taking value: OpaquePointer) {
        pointer = value
    }

    deinit { g_variant_unref(pointer) }

    // MARK: Builders

    package static func string(_ value: String) -> GVariantRef { GVariantRef(sinking: g_variant_new_string(value)) }
    package static func objectPath(_ value: String) -> GVariantRef { GVariantRef(sinking: g_variant_new_object_path(value)) }
    package static func boolean(_ value: Bool) -> GVariantRef { GVariantRef(sinking: g_variant_new_boolean(value ? 1 : 0)) }

    /// `value` boxed as a `v`.
    package static func variant(_ value: GVariantRef) -> GVariantRef { GVariantRef(sinking: g_variant_new_variant(value.pointer)) }

    /// A tuple of `children` (each gets a reference of the tuple's own).
    package static func tuple(_ children: [GVariantRef]) -> GVariantRef {
        var pointers: [OpaquePointer?] = children.map(\.pointer)
        let tuple = pointers.withUnsafeMutableBufferPointer { g_variant_new_tuple($0.baseAddress, gsize($0.count)) }!
        return withExtendedLifetime(children) { GVariantRef(sinking: tuple) }
    }

    /// An array of type `type` (such as `ao`, `a{ss}`) of `elements`.
    private static func array(_ type: String, _ elements: [GVariantRef]) -> GVariantRef {
        let arrayType = g_variant_type_new(type)
        defer { g_variant_type_free(arrayType) }
        let builder = g_variant_builder_new(arrayType)!
        defer { g_variant_builder_unref(builder) }
        for element in elements { g_variant_builder_add_value(builder, element.pointer) }
        return withExtendedLifetime(elements) { GVariantRef(sinking: g_variant_builder_end(builder)) }
    }

    private static func dictionaryEntry(_ key: GVariantRef, _ value: GVariantRef) -> GVariantRef {
        GVariantRef(sinking: g_variant_new_dict_entry(key.pointer, value.pointer))
    }

    /// Object paths as an `ao`.
    package static func objectPaths(_ paths: some Sequence<String>) -> GVariantRef {
        array("ao", paths.map(objectPath))
    }

    /// Item attributes as an `a{ss}`, as searches and CreateItem take them.
    package static func stringDictionary(_ dictionary: [String: String]) -> GVariantRef {
        array("a{ss}", dictionary.map { dictionaryEntry(string($0.key), string($0.value)) })
    }

    /// D-Bus properties as an `a{sv}`, such as CreateItem's label and attributes.
    package static func properties(_ properties: [(name: String, value: GVariantRef)]) -> GVariantRef {
        array("a{sv}", properties.map { dictionaryEntry(string($0.name), variant($0.value)) })
    }

    // MARK: Readers

    /// The value's type, such as `a{ss}`.
    package var typeString: String { String(cString: g_variant_get_type_string(pointer)) }

    /// The number of children of a container (array, tuple, dictionary entry).
    package var count: Int { Int(g_variant_n_children(pointer)) }

    /// The child at `index` of a container (the index must be in range: check `count` or the type).
    package subscript(index: Int) -> GVariantRef { GVariantRef(taking: g_variant_get_child_value(pointer, gsize(index))) }

    /// The value of `key` in an `a{sv}` dictionary, unboxed; nil when absent (or not a dictionary).
    package func value(forKey key: String) -> GVariantRef? {
        guard typeString == "a{sv}" else { return nil }
        return g_variant_lookup_value(pointer, key, nil).map(GVariantRef.init(taking:))
    }

    /// The children of a container, in order.
    package var children: [GVariantRef] { (0..<count).map { self[$0] } }

    /// The value inside a `v`; nil for another type.
    package var unboxed: GVariantRef? { typeString == "v" ? GVariantRef(taking: g_variant_get_variant(pointer)) : nil }

    /// The text of an `s` or `o`; nil for another type.
    package var string: String? {
        let type = typeString
        return type == "s" || type == "o" ? String(cString: g_variant_get_string(pointer, nil)) : nil
    }

    /// The text of an `o` only (an object path); nil for another type.
    package var objectPath: String? { typeString == "o" ? String(cString: g_variant_get_string(pointer, nil)) : nil }

    package var bool: Bool? { typeString == "b" ? g_variant_get_boolean(pointer) != 0 : nil }

    /// The paths of an `ao`; nil for another type.
    package var objectPaths: [String]? {
        guard typeString == "ao" else { return nil }
        return children.compactMap(\.objectPath)
    }

    // Readers that keep the value alive for the whole C call (a child value's only reference is
    // the wrapper: `value[0].pointer` alone could let it go before the call reads it).
    package var uint32: UInt32 { withExtendedLifetime(self) { g_variant_get_uint32(pointer) } }
    package var uint64: UInt64 { withExtendedLifetime(self) { UInt64(g_variant_get_uint64(pointer)) } }

    /// Lends the bytes of an `ay` where they lie.
    package func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        withExtendedLifetime(self) {
            var count: gsize = 0
            let base = g_variant_get_fixed_array(pointer, &count, 1)
            return body(UnsafeRawBufferPointer(start: count > 0 ? base : nil, count: Int(count)))
        }
    }

    /// The pairs of an `a{ss}`, such as an item's Attributes; nil for another type.
    package var stringDictionary: [String: String]? {
        guard typeString == "a{ss}" else { return nil }
        var dictionary: [String: String] = [:]
        for entry in children {
            if let key = entry[0].string, let value = entry[1].string { dictionary[key] = value }
        }
        return dictionary
    }
}

internal import CLibSecret
import TokenCacheCore
import FoundationEssentials

/// Prompts, in one place, run as the specification says: Prompt.Prompt with an empty window id,
/// then the Completed signal, waited for within a bound the caller chooses (the backend's rule:
/// `Options.allowsUnlockPrompt`), and dismissed when not completed in time. Writes (CreateItem,
/// Delete) run theirs too: KeePassXC answers every write with a prompt that completes at once.
extension SecretServiceClient {
    /// Unlocks `collection` (Service.Unlock), showing the provider's prompt if it asks for one
    /// and waiting at most `timeout` for it.
    /// - Throws: `promptDismissed` when the prompt was dismissed; `timedOut` when nobody answered.
    package func unlock(_ collection: ObjectPath, timeout: TimeInterval) throws(TokenCacheError) {
        let action = "unlock \(collection)"
        let reply = try call("Unlock", on: Self.servicePath, interface: Self.serviceInterface,
                             arguments: [.objectPaths([collection])], replyType: "(aoo)", action: action)
        var unlocked = reply[0].objectPaths ?? []
        if let prompt = Self.path(reply[1]) {
            switch try complete(prompt, timeout: timeout, action: action) {
            case .completed(let result): unlocked = result?.objectPaths ?? []
            case .dismissed: break
            case .timedOut:
                throw TokenCacheError(.timedOut, "Nobody answered the unlock prompt within \(Int(timeout)) s.",
                                      hint: "Unlock the keyring and retry; nothing was read or changed",
                                      reason: .unlockPromptTimedOut(seconds: Int(timeout)))
            }
        }
        guard !unlocked.contains(collection) else { return }
        throw TokenCacheError(.promptDismissed, "The unlock prompt for \(collection) was dismissed.",
                              hint: "Unlock the keyring and retry; nothing was read or changed", reason: .unlockPromptDismissed)
    }

    /// Creates a collection labelled `label` (Service.CreateCollection), waiting at most
    /// `timeout` for its password prompt; with `alias` ("default"), the provider points that
    /// alias at it, as libsecret's store does when the default collection is missing.
    /// - Throws: `promptDismissed` when the prompt was dismissed, could not be shown or timed out.
    package func createCollection(labelled label: String, alias: String = "", timeout: TimeInterval) throws(TokenCacheError) -> ObjectPath {
        let action = "create the collection '\(label)'"
        let dismissed = TokenCacheError(.promptDismissed,
                                        "Creating the collection '\(label)' needs a password prompt, which was dismissed or could not be shown.",
                                        hint: "Use the default mapping (items in the default collection, tagged with the group), which never prompts",
                                        reason: .createCollectionPromptDismissed(label: label))
        let properties = GVariantRef.properties([("org.freedesktop.Secret.Collection.Label", .string(label))])
        let reply: GVariantRef
        do {
            reply = try call("CreateCollection", on: Self.servicePath, interface: Self.serviceInterface,
                             arguments: [properties, .string(alias)], replyType: "(oo)", action: action)
        } catch where error.code == .timedOut {
            throw dismissed
        }
        if let created = Self.path(reply[0]) { return created }
        guard let prompt = Self.path(reply[1]),
              case .completed(let result) = try complete(prompt, timeout: timeout, action: action),
              let created = result?.objectPath, created != "/" else { throw dismissed }
        return created
    }

    /// Dismisses a prompt the provider asked for (no reply awaited): one not completed in time.
    package func dismiss(_ prompt: ObjectPath) {
        bus.send("Dismiss", on: prompt, interface: "org.freedesktop.Secret.Prompt", arguments: [])
    }

    /// How a prompt ended: completed with its result, dismissed, or not answered in time
    /// (then dismissed by us, so no prompt is left on screen).
    package enum PromptOutcome {
        case completed(GVariantRef?)
        case dismissed
        case timedOut
    }

    /// Shows a prompt (Prompt.Prompt) and waits at most `timeout` for its Completed signal,
    /// on a GLib main context of this thread's own.
    package func complete(_ prompt: ObjectPath, timeout: TimeInterval, action: String) throws(TokenCacheError) -> PromptOutcome {
        let context = g_main_context_new()
        g_main_context_push_thread_default(context)
        defer {
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
        }
        let waiter = PromptWaiter()
        // Subscribed before Prompt is called, so the signal cannot come first and be missed;
        // the subscription holds a reference to the waiter until GDBus drops it.
        let subscription = g_dbus_connection_signal_subscribe(
            bus.unownedConnection, bus.name, "org.freedesktop.Secret.Prompt", "Completed", prompt, nil, G_DBUS_SIGNAL_FLAGS_NONE,
            { _, _, _, _, _, parameters, waiter in
                guard let parameters, let waiter else { return }
                Unmanaged<PromptWaiter>.fromOpaque(waiter).takeUnretainedValue().complete(GVariantRef(sinking: parameters))
            }, Unmanaged.passRetained(waiter).toOpaque(), { waiter in Unmanaged<PromptWaiter>.fromOpaque(waiter!).release() })
        defer {
            g_dbus_connection_signal_unsubscribe(bus.unownedConnection, subscription)
            // GDBus releases the waiter from an idle source on this context: run it while it exists.
            while g_main_context_iteration(context, 0) != 0 {}
        }
        let timer = g_timeout_source_new(UInt32(clamping: Self.milliseconds(timeout)))!
        defer { g_source_destroy(timer); g_source_unref(timer) }
        g_source_set_callback(timer, { waiter in
            Unmanaged<PromptWaiter>.fromOpaque(waiter!).takeUnretainedValue().expired = true
            return 0  // G_SOURCE_REMOVE
        }, Unmanaged.passUnretained(waiter).toOpaque(), nil)
        g_source_attach(timer, context)

        _ = try call("Prompt", on: prompt, interface: "org.freedesktop.Secret.Prompt", arguments: [.string("")],
                     replyType: "()", action: action)
        return withExtendedLifetime(waiter) {
            while waiter.outcome == nil && !waiter.expired { g_main_context_iteration(context, 1) }
            guard let outcome = waiter.outcome else {
                dismiss(prompt)
                return .timedOut
            }
            return outcome
        }
    }
}

/// What a prompt's Completed signal said, filled in on the waiting thread (its main context).
private final class PromptWaiter {
    package var outcome: SecretServiceClient.PromptOutcome?
    package var expired = false

    /// Completed's `(bv)`: dismissed, then the result.
    package func complete(_ parameters: GVariantRef) {
        guard parameters.typeString == "(bv)" else { return }
        outcome = parameters[0].bool == false ? .completed(parameters[1].unboxed) : .dismissed
    }
}

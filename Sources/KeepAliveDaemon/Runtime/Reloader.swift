import _KeepalivedControlProtocol
import KeepAlive
import Logging

/// Rereads the options and applies them to the running manager (SIGHUP, `systemctl reload`, the
/// control socket's `reload`). Outputs whose device stays keep playing; a bad options file is
/// refused and the running configuration kept. Called on the daemon's main loop only, which
/// applies every reload and rescan in turn (``MainLoopQueue``): its rollback restores the options
/// it replaced, which no other reload can have changed meanwhile. Never on a cooperative pool:
/// reconfiguring may join playback threads.
struct Reloader: Sendable {
    let manager: KeepAliveManager
    /// Adds what the reloaded choice picks, as at start.
    let scanner: OutputScanner
    let logger: Logger
    let load: @Sendable () throws -> PlaybackOptions
    /// Checks the daemon's own settings (`--pause-when`, `--linger`, …) before anything changes,
    /// throwing to refuse the reload, and returns how to apply them, on the main loop, once the
    /// manager took the configuration.
    let prepare: @Sendable (PlaybackOptions, KeepAliveConfiguration) throws -> @Sendable (_ mainLoop: ThreadOwner) -> Void

    /// Reads the options again and applies them: on the main loop, one at a time and in order
    /// with the rescans (``MainLoopQueue``).
    func reload(trigger: String, on mainLoop: ThreadOwner) -> ControlReply {
        mainLoop.preconditionOwned("Reloader.reload")
        let configuration: KeepAliveConfiguration
        let apply: @Sendable (ThreadOwner) -> Void
        let previous = (base: scanner.base, choice: scanner.choice)
        do {
            let options = try load()
            let base = try options.makeConfiguration()
            scanner.use(base, choice: options.choice)
            configuration = scanner.planned()
            do { apply = try prepare(options, configuration) } catch {
                scanner.use(previous.base, choice: previous.choice)
                throw error
            }
        } catch {
            let message = (error as? CleanExit)?.description ?? "\(error)"
            logger.error("reload refused; keeping the running configuration", metadata: ["trigger": "\(trigger)", "error": "\(message)"])
            return .failure("reload refused: \(message)")
        }
        do {
            let outcome = try manager.reconfigure(configuration)
            apply(mainLoop)
            logger.info("reloaded", metadata: ["trigger": "\(trigger)", "outcome": "\(outcome)"])
            return ControlReply(ok: true, changed: outcome != .unchanged)
        } catch {
            scanner.use(previous.base, choice: previous.choice)
            logger.error("reload refused; keeping the running configuration", metadata: ["trigger": "\(trigger)", "error": "\(error)"])
            return .failure("reload refused: \(error)")
        }
    }
}

extension Reloader {
    /// The daemon's reloader: besides the outputs, a reload applies the session policy
    /// (`--pause-when`), `--linger`, the hooks and power settings, `--cec` and `--mqtt`, each checked
    /// before anything changes.
    init(manager: KeepAliveManager, scanner: OutputScanner, logger: Logger, load: @escaping @Sendable () throws -> PlaybackOptions,
         applying parts: (logind: LogindFollower, linger: LingerController, activity: BoxActivity, cec: CECFollower, mqtt: MQTTController)) {
        self.init(manager: manager, scanner: scanner, logger: logger, load: load, prepare: { next, configuration in
            let policy = (try? next.session.policy) ?? PauseStateMachine.Policy()
            let plan = try next.lingerPlan(for: configuration)
            let power = try next.activitySettings
            let cecSettings = try next.cec.settings
            // The password is read again: a reload after it changed logs in with the new one.
            let mqtt = try next.mqtt.configuration()
            return { mainLoop in
                parts.logind.policyChanged(policy)
                parts.linger.apply(plan, on: mainLoop)
                parts.activity.apply(power)
                parts.cec.apply(cecSettings)
                parts.mqtt.apply(mqtt, on: mainLoop)
            }
        })
    }
}

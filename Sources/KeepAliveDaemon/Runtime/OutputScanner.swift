import KeepAlive
import Logging

/// With `--all`, `--digital` or `--analog`: rescans ALSA's device hints when a card or ALSA's
/// configuration changes (``HintWatcher``), adds the outputs that appeared (a TV switched on, a
/// USB DAC plugged in) and drops the ones that vanished, through
/// ``KeepAliveManager/reconfigure(_:)``: the other outputs play on untouched.
///
/// Runs on the daemon's main thread (never on a cooperative pool: a rescan reads the card list
/// and reconfiguring joins playback threads).
///
/// ```swift
/// let scanner = OutputScanner(manager: manager, selection: .digital, named: [], allowExclusive: false, logger: logger)
/// scanner.rescan()
/// ```
final class OutputScanner {
    let manager: KeepAliveManager
    let selection: OutputSelection
    let named: [String]
    let allowExclusive: Bool
    let logger: Logger

    init(manager: KeepAliveManager, selection: OutputSelection, named: [String], allowExclusive: Bool, logger: Logger) {
        self.manager = manager
        self.selection = selection
        self.named = named
        self.allowExclusive = allowExclusive
        self.logger = logger
    }

    /// Reads the hints and applies what changed; true when the outputs changed. The exclusions
    /// are the running configuration's, so a reload that changes `--exclude` holds from then on.
    @discardableResult
    func rescan() -> Bool {
        let exclusions = manager.configuration.exclusions
        let picked = selection.pick(from: ALSADevice.playbackDevices(), allowExclusive: allowExclusive, excluding: exclusions)
        let current = Set(picked).subtracting(named)
        // Compared with what runs now, which a reload may have changed since the last scan.
        guard current != Set(manager.configuration.devices).subtracting(named) else { return false }
        // New PCMs may come from an edited configuration file, which opens would not see.
        ALSADevice.reloadConfiguration()
        var configuration = manager.configuration
        configuration.devices = named + picked.filter { !named.contains($0) }
        do {
            let outcome = try manager.reconfigure(configuration)
            logger.info("outputs changed", metadata: ["selection": "\(selection)", "outcome": "\(outcome)"])
            return true
        } catch {
            logger.error("cannot apply the new outputs", metadata: ["error": "\(error)"])
            return false
        }
    }
}

import KeepAlive
import Logging
import ServiceLifecycle

/// With `--all`, `--digital` or `--analog`: rescans ALSA's device hints every second and adds
/// the outputs that appeared (a TV switched on, a USB DAC plugged in) and drops the ones that
/// vanished, through ``KeepAliveManager/reconfigure(_:)``: the other outputs play on untouched.
///
/// The hints come from the cards the kernel lists and from ALSA's configuration files, which
/// alsa-lib rereads when they change. Only runs with a selection.
struct OutputScanner: Service {
    let manager: KeepAliveManager
    let selection: OutputSelection
    let named: [String]
    let allowExclusive: Bool
    let logger: Logger
    static let interval: Duration = .seconds(1)

    func run() async throws {
        var previous = Set(manager.configuration.devices).subtracting(named)
        while !Task.isCancelled, !Task.isShuttingDownGracefully {
            try? await Task.sleep(for: Self.interval)
            guard !Task.isCancelled, !Task.isShuttingDownGracefully else { break }
            let picked = selection.pick(from: ALSADevice.playbackDevices(), allowExclusive: allowExclusive)
            let current = Set(picked).subtracting(named)
            guard current != previous else { continue }
            // New PCMs may come from an edited configuration file, which opens would not see.
            ALSADevice.reloadConfiguration()
            var configuration = manager.configuration
            configuration.devices = named + picked.filter { !named.contains($0) }
            do {
                let outcome = try manager.reconfigure(configuration)
                logger.info("outputs changed", metadata: ["selection": "\(selection)", "outcome": "\(outcome)"])
                previous = current
            } catch {
                logger.error("cannot apply the new outputs", metadata: ["error": "\(error)"])
            }
        }
    }
}

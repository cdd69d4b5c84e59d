import _KeepalivedControlProtocol

/// How a player's release of a card device is answered: the loans decide it, the control
/// socket's server carries it out (``ControlServer/Handlers/release``).
enum ReleaseAnswer: Sendable {
    /// At once: the device is released, or why not.
    case reply(ControlReply)
    /// With `reply` once `closing` is finished: keepalived's outputs on the device are
    /// closed.
    case afterClose(OutputsClosing, reply: ControlReply)
    /// Once `gate` opens (`--power-on-wait`: the amplifier first): then `release` releases
    /// the device and says how it is answered (never after another gate); its argument says
    /// whether the player stopped waiting.
    case afterPowerOn(PowerOnGate, release: @Sendable (_ hungUp: () -> Bool) -> ReleaseAnswer)
}

import Testing

@testable import KeepAliveDaemon

/// The frames keepalived sends, byte for byte as HDMI-CEC 1.4 lays them out (HDMI 1.4b
/// Supplement 1: the header block's initiator and destination nibbles, CEC 13 and 15's opcodes
/// and operands; the same bytes as linux/cec-funcs.h's cec_msg_* helpers write), and the
/// answers a follower owes.
@Suite("CEC messages")
struct CECMessageTests {
    @Test("System Audio Mode Request: Playback 1 to the audio system, with its physical address")
    func systemAudioModeRequest() {
        #expect(CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x2000).bytes == [0x45, 0x70, 0x20, 0x00])
        #expect(CECMessage.systemAudioModeRequest(from: 11, physicalAddress: 0x1234).bytes == [0xB5, 0x70, 0x12, 0x34])
        #expect("\(CECMessage.systemAudioModeRequest(from: 4, physicalAddress: 0x2100))" == "4→5 System Audio Mode Request (2.1.0.0)")
    }

    @Test("Image View On to the TV, Active Source broadcast, Standby")
    func wakeAndStandby() {
        #expect(CECMessage.imageViewOn(from: 4).bytes == [0x40, 0x04])
        #expect(CECMessage.activeSource(from: 8, physicalAddress: 0x3200).bytes == [0x8F, 0x82, 0x32, 0x00])
        #expect(CECMessage.standby(from: 4, to: 5).bytes == [0x45, 0x36])
        #expect(CECMessage.standby(from: 4, to: 0).bytes == [0x40, 0x36])
        #expect("\(CECMessage.activeSource(from: 4, physicalAddress: 0x2000))" == "4→all Active Source (2.0.0.0)")
    }

    @Test("the follower's answers: power status on, Feature Abort 'unrecognized opcode'")
    func answers() {
        #expect(CECMessage.reportPowerStatusOn(from: 4, to: 0).bytes == [0x40, 0x90, 0x00])
        #expect(CECMessage.featureAbort(from: 4, to: 0, opcode: 0x44).bytes == [0x40, 0x00, 0x44, 0x00])
        let ask = CECMessage(bytes: [0x04, 0x8F])!
        #expect(ask.answer(at: 4) == .reportPowerStatusOn(from: 4, to: 0))
        // User Control Pressed: a Playback device keepalived does not have a remote to follow.
        #expect(CECMessage(bytes: [0x54, 0x44, 0x41])!.answer(at: 4) == .featureAbort(from: 4, to: 5, opcode: 0x44))
    }

    @Test("what gets no answer: broadcasts, others' messages, Feature Abort, Standby, replies, Unregistered, polls")
    func noAnswer() {
        #expect(CECMessage(bytes: [0x0F, 0x36])!.answer(at: 4) == nil)          // broadcast Standby
        #expect(CECMessage(bytes: [0x08, 0x8F])!.answer(at: 4) == nil)          // to Playback 2
        #expect(CECMessage(bytes: [0x04, 0x00, 0x70, 0x00])!.answer(at: 4) == nil)
        #expect(CECMessage(bytes: [0x04, 0x36])!.answer(at: 4) == nil)
        #expect(CECMessage(bytes: [0x54, 0x72, 0x01])!.answer(at: 4) == nil)    // Set System Audio Mode
        #expect(CECMessage(bytes: [0xF4, 0x8F])!.answer(at: 4) == nil)          // from Unregistered
        #expect(CECMessage(bytes: [0x04])!.answer(at: 4) == nil)                // a poll
    }

    @Test("frames read back: header nibbles, opcode, operands; empty and overlong refused")
    func parse() {
        let frame = CECMessage(bytes: [0x5F, 0x72, 0x01])!
        #expect(frame.initiator == 5 && frame.destination == 15 && frame.opcode == 0x72 && frame.operands == [1])
        #expect(frame.isBroadcast)
        #expect("\(frame)" == "5→all Set System Audio Mode (on)")
        #expect(CECMessage(bytes: []) == nil)
        #expect(CECMessage(bytes: [UInt8](repeating: 0x40, count: 17)) == nil)
        #expect(CECMessage(bytes: [0x40, 0x04])!.bytes == [0x40, 0x04])
        #expect("\(CECMessage(bytes: [0x40, 0x9F])!)" == "4→0 opcode 0x9F")
        #expect("\(CECMessage(bytes: [0xF0, 0x04])!)" == "unregistered→0 Image View On")
        #expect("\(CECMessage(bytes: [0x50, 0x90, 0x01])!)" == "5→0 Report Power Status (standby)")
    }
}

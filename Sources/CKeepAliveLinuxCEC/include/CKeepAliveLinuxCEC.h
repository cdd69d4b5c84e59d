// CKeepAliveLinuxCEC: the kernel's CEC framework (linux/cec.h) for Swift, which cannot call the variadic
// ioctl nor spell its request numbers (_IOWR macros). Only the ioctls on their fixed-size
// structures live here, each answered in plain types; what a message means, and when to send
// one, is Swift's (Sources/KeepAliveDaemon/CEC). Named for its scope, as swift-nio's CNIOLinux.
#ifndef CKEEPALIVE_LINUXCEC_H
#define CKEEPALIVE_LINUXCEC_H

#include <stdint.h>
// The status bits (CEC_TX_STATUS_*, CEC_EVENT_*) Swift reads as plain constants.
#include <linux/cec.h>

#ifdef __cplusplus
extern "C" {
#endif

/// What the adapter says of itself (CEC_ADAP_G_CAPS, CEC_ADAP_G_PHYS_ADDR, CEC_ADAP_G_LOG_ADDRS).
typedef struct clinuxcec_adapter {
    /// The driver's name of the adapter ("vivid-000-vid-out1", "dw_hdmi").
    char name[32];
    /// CEC_CAP_* bits.
    uint32_t capabilities;
    /// 0xffff (CEC_PHYS_ADDR_INVALID) until the sink's EDID gave one.
    uint16_t physical_address;
    /// The logical addresses claimed now, one bit each; 0 while none is.
    uint16_t logical_address_mask;
    /// The first logical address asked for (CEC_LOG_ADDR_INVALID when none is configured).
    uint8_t logical_address;
    /// How many logical addresses are configured (claimed or waiting for a physical address).
    uint8_t configured;
    /// Whether the configuration is keepalived's own: one Playback address named `osd_name`.
    uint8_t ours;
} clinuxcec_adapter;

/// Reads the adapter's state into `adapter`, comparing its configuration with `osd_name`.
/// Returns 0, or -1 with errno set (ENODEV: the adapter was unplugged).
int clinuxcec_adapter_state(int fd, const char *osd_name, clinuxcec_adapter *adapter);

/// Makes this file handle an initiator (CEC_S_MODE CEC_MODE_INITIATOR) that, with `follower`,
/// also follows the messages sent to the adapter's addresses (CEC_MODE_FOLLOWER, passthrough
/// off: the kernel answers the core's messages and hands the rest here), and otherwise follows
/// nothing (CEC_MODE_NO_FOLLOWER: with no follower at all the kernel answers Feature Abort for
/// the adapter's addresses itself). Returns 0, or -1 with errno set (EBUSY: another handle is
/// the exclusive follower).
int clinuxcec_set_mode(int fd, int follower);

/// Asks for one Playback logical address named `osd_name`, CEC 1.4, no vendor id, falling back
/// to Unregistered (15) when every Playback address is taken (CEC_ADAP_S_LOG_ADDRS). Without a
/// physical address the kernel claims it once one comes. `clear_first`: drop another
/// configuration before (the kernel refuses to replace one). Returns 0, or -1 with errno set.
int clinuxcec_claim_playback(int fd, const char *osd_name, int clear_first);

/// Queues `length` bytes (header, opcode, operands; 1-16) for transmission (CEC_TRANSMIT) on a
/// non-blocking handle: the result arrives later through clinuxcec_receive, with this
/// `sequence`. Returns 0, or -1 with errno set.
int clinuxcec_transmit(int fd, const uint8_t *bytes, uint32_t length, uint32_t *sequence);

/// One message from the adapter (CEC_RECEIVE): a received message (sequence 0) or the result of
/// one of ours (its sequence, tx_status set).
typedef struct clinuxcec_message {
    uint8_t bytes[16];
    uint32_t length;
    uint32_t sequence;
    uint8_t tx_status;
    uint8_t rx_status;
} clinuxcec_message;

/// Takes the next message without waiting. Returns 0, or -1 with errno set (EAGAIN: none).
int clinuxcec_receive(int fd, clinuxcec_message *message);

/// One event (CEC_DQEVENT): CEC_EVENT_STATE_CHANGE carries the new addresses.
typedef struct clinuxcec_event {
    uint32_t event;
    uint32_t flags;
    uint16_t physical_address;
    uint16_t logical_address_mask;
} clinuxcec_event;

/// Takes the next event without waiting. Returns 0, or -1 with errno set (EAGAIN: none).
int clinuxcec_dequeue_event(int fd, clinuxcec_event *event);

#ifdef __cplusplus
}
#endif

#endif

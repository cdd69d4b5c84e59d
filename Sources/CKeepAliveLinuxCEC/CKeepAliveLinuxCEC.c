#include "CKeepAliveLinuxCEC.h"

#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>

int clinuxcec_adapter_state(int fd, const char *osd_name, clinuxcec_adapter *adapter) {
    struct cec_caps caps;
    struct cec_log_addrs addresses;
    uint16_t physical = CEC_PHYS_ADDR_INVALID;
    memset(&caps, 0, sizeof caps);
    memset(&addresses, 0, sizeof addresses);
    memset(adapter, 0, sizeof *adapter);
    if (ioctl(fd, CEC_ADAP_G_CAPS, &caps) != 0) return -1;
    if (ioctl(fd, CEC_ADAP_G_PHYS_ADDR, &physical) != 0) return -1;
    if (ioctl(fd, CEC_ADAP_G_LOG_ADDRS, &addresses) != 0) return -1;
    memcpy(adapter->name, caps.name, sizeof adapter->name);
    adapter->name[sizeof adapter->name - 1] = 0;
    adapter->capabilities = caps.capabilities;
    adapter->physical_address = physical;
    adapter->logical_address_mask = addresses.log_addr_mask;
    adapter->logical_address = addresses.num_log_addrs > 0 ? addresses.log_addr[0] : CEC_LOG_ADDR_INVALID;
    adapter->configured = addresses.num_log_addrs;
    adapter->ours = addresses.num_log_addrs == 1 && addresses.log_addr_type[0] == CEC_LOG_ADDR_TYPE_PLAYBACK
        && strncmp(addresses.osd_name, osd_name, sizeof addresses.osd_name) == 0;
    return 0;
}

int clinuxcec_set_mode(int fd, int follower) {
    uint32_t mode = CEC_MODE_INITIATOR | (follower ? CEC_MODE_FOLLOWER : CEC_MODE_NO_FOLLOWER);
    return ioctl(fd, CEC_S_MODE, &mode);
}

int clinuxcec_claim_playback(int fd, const char *osd_name, int clear_first) {
    struct cec_log_addrs addresses;
    if (clear_first) {
        memset(&addresses, 0, sizeof addresses);
        if (ioctl(fd, CEC_ADAP_S_LOG_ADDRS, &addresses) != 0) return -1;
    }
    memset(&addresses, 0, sizeof addresses);
    addresses.cec_version = CEC_OP_CEC_VERSION_1_4;
    addresses.vendor_id = CEC_VENDOR_ID_NONE;
    addresses.flags = CEC_LOG_ADDRS_FL_ALLOW_UNREG_FALLBACK;
    addresses.num_log_addrs = 1;
    addresses.log_addr_type[0] = CEC_LOG_ADDR_TYPE_PLAYBACK;
    addresses.primary_device_type[0] = CEC_OP_PRIM_DEVTYPE_PLAYBACK;
    addresses.all_device_types[0] = CEC_OP_ALL_DEVTYPE_PLAYBACK;
    strncpy(addresses.osd_name, osd_name, sizeof addresses.osd_name - 1);
    return ioctl(fd, CEC_ADAP_S_LOG_ADDRS, &addresses);
}

int clinuxcec_transmit(int fd, const uint8_t *bytes, uint32_t length, uint32_t *sequence) {
    struct cec_msg message;
    if (length < 1 || length > CEC_MAX_MSG_SIZE) {
        errno = EINVAL;
        return -1;
    }
    memset(&message, 0, sizeof message);
    memcpy(message.msg, bytes, length);
    message.len = length;
    if (ioctl(fd, CEC_TRANSMIT, &message) != 0) return -1;
    *sequence = message.sequence;
    return 0;
}

int clinuxcec_receive(int fd, clinuxcec_message *out) {
    struct cec_msg message;
    memset(&message, 0, sizeof message);
    if (ioctl(fd, CEC_RECEIVE, &message) != 0) return -1;
    memset(out, 0, sizeof *out);
    out->length = message.len > CEC_MAX_MSG_SIZE ? CEC_MAX_MSG_SIZE : message.len;
    memcpy(out->bytes, message.msg, out->length);
    out->sequence = message.sequence;
    out->tx_status = message.tx_status;
    out->rx_status = message.rx_status;
    return 0;
}

int clinuxcec_dequeue_event(int fd, clinuxcec_event *out) {
    struct cec_event event;
    memset(&event, 0, sizeof event);
    if (ioctl(fd, CEC_DQEVENT, &event) != 0) return -1;
    memset(out, 0, sizeof *out);
    out->event = event.event;
    out->flags = event.flags;
    if (event.event == CEC_EVENT_STATE_CHANGE) {
        out->physical_address = event.state_change.phys_addr;
        out->logical_address_mask = event.state_change.log_addr_mask;
    }
    return 0;
}

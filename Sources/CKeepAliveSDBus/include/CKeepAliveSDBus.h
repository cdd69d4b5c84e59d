// sd-bus calls the daemon makes to follow logind and to share cards through the session bus's
// device reservations (org.freedesktop.ReserveDevice1). sd-bus's method calls, signal matches and
// message readers are varargs, which Swift cannot call; these wrappers give each use one plain
// signature. Every function returns 0 or a negative errno, as sd-bus does.
//
// The same libsystemd speaks the service manager's notify protocol: <systemd/sd-daemon.h>'s
// sd_notify and sd_watchdog_enabled are plain C, which Swift calls directly through this module,
// as is <systemd/sd-id128.h>'s sd_id128_get_machine_app_specific (the MQTT device's stable id,
// which never publishes the machine id itself).
#ifndef CKEEPALIVE_SDBUS_H
#define CKEEPALIVE_SDBUS_H

#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-id128.h>

/// logind's Manager.Inhibit(what, who, why, mode); `*fd` receives an owned duplicate of the lock.
int ka_bus_inhibit(sd_bus *bus, const char *what, const char *who, const char *why, const char *mode, int *fd);

/// Calls `handler` for every Manager.PrepareForSleep(b) signal.
int ka_bus_match_prepare_for_sleep(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata);

/// Reads the one boolean argument of a PrepareForSleep signal.
int ka_bus_read_bool(sd_bus_message *message, int *value);

/// Calls `handler` whenever org.freedesktop.login1 changes owner (logind started or restarted,
/// or gone), and for no other name: a busy bus's other names never wake the daemon.
int ka_bus_match_logind_owner(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata);

/// Reads the new owner of a NameOwnerChanged signal; "" when the name was let go.
int ka_bus_read_new_owner(sd_bus_message *message, const char **owner);

/// The object path of the session of `pid` (Manager.GetSessionByPID), malloc'ed into `*path`.
int ka_bus_session_by_pid(sd_bus *bus, uint32_t pid, char **path);

/// The object path of `uid`'s display session (User.Display), for a process outside any
/// session (a `systemd --user` service); "/" when the user has none. malloc'ed into `*path`.
int ka_bus_user_display(sd_bus *bus, uint32_t uid, char **path);

/// Reads a boolean or uint64 property of a login1 Session object.
int ka_bus_session_bool(sd_bus *bus, const char *path, const char *property, int *value);
int ka_bus_session_u64(sd_bus *bus, const char *path, const char *property, uint64_t *value);

/// Calls `handler` for every PropertiesChanged of the object at `path`.
int ka_bus_match_properties_changed(sd_bus *bus, const char *path, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata);

// MARK: - Device reservation (org.freedesktop.ReserveDevice1, on the session bus)

/// Asks `userdata`'s owner to give its device up for a program of `priority`; returns 1 when it
/// did (the device is closed), 0 when it keeps it.
typedef int (*ka_release_request)(void *userdata, int32_t priority);

/// What a reservation's object shows: its three properties, and whom to ask on RequestRelease.
typedef struct ka_reservation {
    char *application_name;
    char *application_device_name;
    int32_t priority;
    ka_release_request on_request;
    void *userdata;
} ka_reservation;

/// Serves org.freedesktop.ReserveDevice1 (RequestRelease(i) -> b, Priority, ApplicationName,
/// ApplicationDeviceName) at `path` from `reservation`, which must outlive `*slot`.
int ka_bus_export_reservation(sd_bus *bus, sd_bus_slot **slot, const char *path, ka_reservation *reservation);

/// The names on the bus (ListNames), a NULL-terminated malloc'ed strv into `*names`.
int ka_bus_list_names(sd_bus *bus, char ***names);

/// The unique name owning `name` (GetNameOwner), malloc'ed into `*owner`; < 0 when it has none.
int ka_bus_name_owner(sd_bus *bus, const char *name, char **owner);

/// Calls `handler` whenever a name under org.freedesktop.ReserveDevice1 changes owner.
int ka_bus_match_reservations(sd_bus *bus, sd_bus_slot **slot, sd_bus_message_handler_t handler, void *userdata);

/// Reads the three arguments of a NameOwnerChanged signal ("" for no owner); they live as long
/// as the message.
int ka_bus_read_owner_change(sd_bus_message *message, const char **name, const char **old_owner, const char **new_owner);

#endif

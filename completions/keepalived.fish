function __keepalived_should_offer_completions_for_flags_or_options -a expected_commands
    set -l non_repeating_flags_or_options $argv[2..]
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __keepalived_parse_tokens
    test "$commands" = "$expected_commands"; and return $non_repeating_flags_or_options_absent
end

function __keepalived_should_offer_completions_for_positional -a expected_commands positional_index_comparison expected_positional_index
    set -l non_repeating_flags_or_options
    set -l non_repeating_flags_or_options_absent 0
    set -l positional_index 0
    set -l commands
    __keepalived_parse_tokens
    test "$commands" = "$expected_commands" -a \( "$positional_index" "$positional_index_comparison" "$expected_positional_index" \)
end

function __keepalived_parse_tokens -S
    set -l unparsed_tokens (__keepalived_tokens -pc)
    switch $unparsed_tokens[1]
    case 'keepalived'
        __keepalived_parse_subcommand 0 'version' 'h/help'
        switch $unparsed_tokens[1]
        case 'run'
            __keepalived_parse_subcommand 0 'd/device=+' 'all' 'digital' 'analog' 'bluetooth' 'exclusive' 'exclude=+' 'signal=' 'frequency=' 'play-for=' 'pause-for=' 'fade=' 'volume=' 'max-level=' 'clip=' 'clip-base64=' 'lead-in=' 'output=+' 'pause-when=+' 'idle-after=' 'on-active=' 'on-idle=' 'on-idle-after=' 'hook-timeout=' 'power-on-wait=' 'power-on-settle=' 'carry' 'cec=' 'cec-wake-tv' 'cec-standby' 'cec-take-over' 'retry-max=' 'buffer=' 'no-ring-loop' 'linger=' 'v/verbose' 'socket=' 'config=' 'player-group=' 'version' 'h/help'
        case 'start'
            __keepalived_parse_subcommand 0 'd/device=+' 'all' 'digital' 'analog' 'bluetooth' 'exclusive' 'exclude=+' 'signal=' 'frequency=' 'play-for=' 'pause-for=' 'fade=' 'volume=' 'max-level=' 'clip=' 'clip-base64=' 'lead-in=' 'output=+' 'pause-when=+' 'idle-after=' 'on-active=' 'on-idle=' 'on-idle-after=' 'hook-timeout=' 'power-on-wait=' 'power-on-settle=' 'carry' 'cec=' 'cec-wake-tv' 'cec-standby' 'cec-take-over' 'retry-max=' 'buffer=' 'no-ring-loop' 'linger=' 'v/verbose' 'socket=' 'version' 'h/help'
        case 'stop'
            __keepalived_parse_subcommand 0 'socket=' 'version' 'h/help'
        case 'status'
            __keepalived_parse_subcommand 0 'socket=' 'json' 'version' 'h/help'
        case 'events'
            __keepalived_parse_subcommand 0 'socket=' 'version' 'h/help'
        case 'devices'
            __keepalived_parse_subcommand 0 'socket=' 'json' 'exclusive' 'exclude=+' 'v/verbose' 'version' 'h/help'
        case 'test'
            __keepalived_parse_subcommand 0 'd/device=+' 'all' 'digital' 'analog' 'bluetooth' 'exclusive' 'exclude=+' 'signal=' 'frequency=' 'play-for=' 'pause-for=' 'fade=' 'volume=' 'max-level=' 'clip=' 'clip-base64=' 'lead-in=' 'output=+' 'pause-when=+' 'idle-after=' 'on-active=' 'on-idle=' 'on-idle-after=' 'hook-timeout=' 'power-on-wait=' 'power-on-settle=' 'carry' 'cec=' 'cec-wake-tv' 'cec-standby' 'cec-take-over' 'retry-max=' 'buffer=' 'no-ring-loop' 'linger=' 'v/verbose' 'socket=' 'config=' 'y/yes' 'version' 'h/help'
        case 'help'
            __keepalived_parse_subcommand -r 1 'version'
        end
    end
end

function __keepalived_tokens
    if test (string split -m 1 -f 1 -- . "$FISH_VERSION") -gt 3
        commandline --tokens-raw $argv
    else
        commandline -o $argv
    end
end

function __keepalived_parse_subcommand -S -a positional_count
    argparse -s r -- $argv
    set -l option_specs $argv[2..]
    set -l is_repeating_positional $_flag_r
    set -el _flag_r
    set -a commands $unparsed_tokens[1]
    set positional_index 0
    while true
        set -e unparsed_tokens[1]
        argparse -sn "$commands" $option_specs -- $unparsed_tokens 2> /dev/null
        set unparsed_tokens $argv
        set positional_index (math $positional_index + 1)
        for non_repeating_flag_or_option in $non_repeating_flags_or_options
            if set -ql "_flag_$(string replace -a - _ -- $non_repeating_flag_or_option)"
                set non_repeating_flags_or_options_absent 1
                break
            end
        end
        test (count $unparsed_tokens) -eq 0 -o \( -z "$is_repeating_positional" -a "$positional_index" -gt "$positional_count" \) && break
    end
end

function __keepalived_complete_directories
    set -l token (commandline -t)
    string match -- '*/' $token
    set -l subdirs $token*/
    printf %s\n $subdirs
end

function __keepalived_custom_completion
    set -x SAP_SHELL fish
    set -x SAP_SHELL_VERSION $FISH_VERSION
    set -l tokens (__keepalived_tokens -p)
    if test -z "$(__keepalived_tokens -t)"
        set -l index (count (__keepalived_tokens -pc))
        set tokens $tokens[..$index] \'\' $tokens[(math $index + 1)..]
    end
    command $tokens[1] $argv $tokens
end

complete -c 'keepalived' -f
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'run' -d 'Play the keep-alive stream in the foreground until SIGINT or SIGTERM.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'start' -d 'Start a background daemon with run\'s options; return once it plays or waits for its device.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'stop' -d 'Stop the running daemon and wait until it has exited.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'status' -d 'Show whether keepalived runs and how each output is doing.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'events' -d 'Print each output\'s changes between active and idle as JSON lines, as they happen.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'devices' -d 'List the sound cards\' outputs: what keepalived opens for each and which selections pick it.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'test' -d 'Play an audible tone on each output run\'s options pick, one after another, to tell which device each is.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_positional "keepalived" -eq 1' -fa 'help' -d 'Show subcommand help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run"' -s 'd' -l 'device' -d 'ALSA PCM to keep awake (repeat for several).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" all' -l 'all' -d 'Keep every output awake: the sound server\'s sinks when one answers (never a card it owns), else the cards (see \'keepalived devices\'); outputs that appear or vanish are picked up or dropped within 2 s.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" digital' -l 'digital' -d 'Keep the digital outputs awake (HDMI, DisplayPort, S/PDIF, IEC958), picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" analog' -l 'analog' -d 'Keep the analog outputs awake, picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" bluetooth' -l 'bluetooth' -d 'Also keep the sound server\'s Bluetooth sinks awake (no selection picks them on its own: a headset must sleep to save its battery); alone, only those. They play a low 30 Hz sine in bursts that survives the Bluetooth codec.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" exclusive' -l 'exclusive' -d 'With --all/--digital/--analog, take a card device without a shared (dmix) form through plughw, locking other programs out of it.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run"' -l 'exclude' -d 'With --all/--digital/--analog/--bluetooth, leave out the outputs (cards\' PCMs, the sound server\'s sinks) whose name or description matches this shell-style pattern (\'*bluez*\', \'USB*\'; repeat for several). See \'keepalived devices --exclude\'.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" signal' -l 'signal' -d 'What to play: clip (the default), zero, fluctuate, sine, white, pink, brown or open-only (sine:440 and fluctuate:25 set the frequency).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" frequency' -l 'frequency' -d 'Frequency of sine (Hz, default 1) or pulses per second of fluctuate (default 50).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" play-for' -l 'play-for' -d 'Play in bursts: seconds of sound…' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" pause-for' -l 'pause-for' -d '…then seconds of digital silence (the device stays open).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" fade' -l 'fade' -d 'Fade in and out of each burst, in seconds (default 0.1).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" volume' -l 'volume' -d 'Level of the clip: a fraction of full scale or decibels (-40dB); default 0.01.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" max-level' -l 'max-level' -d 'Ceiling no output sample may exceed (fraction or dB); default 0.05.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" clip' -l 'clip' -d 'WAV file to loop instead of the embedded clip.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" clip-base64' -l 'clip-base64' -d 'WAV file to loop, as base64 text.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" lead-in' -l 'lead-in' -d 'With --carry: after the device is switched to a carried player\'s format (the one break a format change needs), play keepalived\'s signal in it this long before the player\'s first frame, like 2s (0 to 10s; default 0): a receiver that mutes while it relocks loses silence, not the music\'s start. The player\'s start waits that much longer.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run"' -l 'output' -d 'Play to NAME with settings of its own: \'NAME OPTIONS…\' in one word, OPTIONS spelled like the options above (--signal, --frequency, --volume, --max-level, --clip, --clip-base64, --play-for, --pause-for, --fade, and --on-active, --on-idle, --on-idle-after for this output instead of the global ones), e.g. --output \'plughw:CARD=DAC --signal sine --frequency 30 --volume -50dB\' or --output \'hw:CARD=DAC --on-active "gpioset gpiochip0 17=1"\'. Repeat for several; NAME is played like a --device. No output may exceed the global --max-level.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run"' -l 'pause-when' -d 'Stop keeping awake while the login session is locked, or idle for --idle-after (repeat for both); it plays again the moment the session is active. Follows logind\'s LockedHint and IdleHint.' -rfka 'locked idle'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" idle-after' -l 'idle-after' -d 'With --pause-when idle: how long the session must have been idle, like 90s, 10min or 1h (default 10min).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" on-active' -l 'on-active' -d 'Run this command when real audio starts on an output that was idle (a player through keepalived:, another stream on a kept sink): its words split like a shell\'s, run without one; KEEPALIVED_EVENT, KEEPALIVED_OUTPUT, KEEPALIVED_PROGRAM and KEEPALIVED_CARD/KEEPALIVED_DEVICE or KEEPALIVED_SINK in its environment; its output goes to the log. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" on-idle' -l 'on-idle' -d 'Run this command when an output\'s real audio has stopped for --on-idle-after; as --on-active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" on-idle-after' -l 'on-idle-after' -d 'How long no real audio must play before an output is idle, like 90s, 10min or 1h (default 5min). Pauses between tracks and track skips stay active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" hook-timeout' -l 'hook-timeout' -d 'How long --on-active and --on-idle may run before they are ended (SIGTERM to their process group, SIGKILL a second later), like 10s or 1min (default 30s).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" power-on-wait' -l 'power-on-wait' -d 'Hold a player\'s open through keepalived: until --on-active has ended (it switches the amplifier on), at most this long, like 5s (from 100ms to 30s; default: no hold; needs --on-active or --cec): the first note plays on an amplifier that is on, while keepalived keeps the card awake. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" power-on-settle' -l 'power-on-settle' -d 'With --power-on-wait: how long the open still waits after --on-active has ended (with --cec and no --on-active: after the receiver is woken), for an amplifier or receiver that takes a moment to play once on, like 500ms (default 0; within --power-on-wait).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" carry' -l 'carry' -d 'Carry a player\'s audio through keepalived: on keepalived\'s own running stream, unchanged, instead of handing the card over: the link to the receiver or DAC never stops between keepalived\'s signal and the music (keepalived on the card\'s own PCM, hw:, in ring-loop or stream mode, IEC958-only ports such as a Pi\'s HDMI included; a player whose format differs gets the device switched to it once). Experimental: see docs/players.md.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" cec' -l 'cec' -d 'Follow the box\'s real audio on HDMI-CEC through this adapter (the kernel\'s CEC framework, like /dev/cec0): when an output becomes active keepalived, as a Playback device, asks the audio system (an AV receiver or soundbar, logical address 5) to turn on and play it (System Audio Mode Request); the TV is left alone. An adapter that is missing or has no physical address yet is waited for.' -rF
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" cec-wake-tv' -l 'cec-wake-tv' -d 'With --cec: also turn the TV on and switch it to the box\'s input (Image View On, Active Source) when the box becomes active.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" cec-standby' -l 'cec-standby' -d 'With --cec: when every output is idle (--on-idle-after), send Standby to what keepalived itself switched on in that active period (it reported standby, or nothing, before keepalived\'s wake): the audio system, and the TV only with --cec-wake-tv. Nothing is put in standby after another device became the active source, nor what the user switched off.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" cec-take-over' -l 'cec-take-over' -d 'With --cec: replace another program\'s configuration of the adapter (Kodi\'s libcec, cec-ctl) with keepalived\'s Playback device. Without it keepalived leaves such an adapter alone, says so in the log and in status, and waits for the other program to let go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" retry-max' -l 'retry-max' -d 'Longest wait between two attempts to reopen a lost device, in seconds.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" buffer' -l 'buffer' -d 'Device buffer to ask for, in seconds (default 2; 8 for a sound server\'s sink).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" no-ring-loop' -l 'no-ring-loop' -d 'Stream to every output, even where the hardware could loop its ring buffer on its own (hw:, plughw:, hdmi: over a card): the device is then not held by the ring loop\'s settings, at the cost of a wakeup about once a second.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" linger' -l 'linger' -d 'On sound-server outputs (pulse, pipewire, a default that goes to PulseAudio or PipeWire): keep the output awake only until this long after any other stream last played on its sink, then let it sleep; keep it awake again as soon as another stream plays. Seconds, or 90s, 10min, 1h. Not supported on hardware outputs.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" v verbose' -l 'verbose' -s 'v' -d 'Log debug detail.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" config' -l 'config' -d 'Options file (KEEPALIVED_OPTIONS="…" in EnvironmentFile syntax) read at start and on reload; its options add to the command line\'s.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" player-group' -l 'player-group' -d 'Let members of this group (audio, for the system service) ask for a card device through the keepalived: ALSA PCM: the control socket becomes theirs too (mode 0660), for that request only.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived run" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start"' -s 'd' -l 'device' -d 'ALSA PCM to keep awake (repeat for several).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" all' -l 'all' -d 'Keep every output awake: the sound server\'s sinks when one answers (never a card it owns), else the cards (see \'keepalived devices\'); outputs that appear or vanish are picked up or dropped within 2 s.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" digital' -l 'digital' -d 'Keep the digital outputs awake (HDMI, DisplayPort, S/PDIF, IEC958), picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" analog' -l 'analog' -d 'Keep the analog outputs awake, picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" bluetooth' -l 'bluetooth' -d 'Also keep the sound server\'s Bluetooth sinks awake (no selection picks them on its own: a headset must sleep to save its battery); alone, only those. They play a low 30 Hz sine in bursts that survives the Bluetooth codec.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" exclusive' -l 'exclusive' -d 'With --all/--digital/--analog, take a card device without a shared (dmix) form through plughw, locking other programs out of it.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start"' -l 'exclude' -d 'With --all/--digital/--analog/--bluetooth, leave out the outputs (cards\' PCMs, the sound server\'s sinks) whose name or description matches this shell-style pattern (\'*bluez*\', \'USB*\'; repeat for several). See \'keepalived devices --exclude\'.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" signal' -l 'signal' -d 'What to play: clip (the default), zero, fluctuate, sine, white, pink, brown or open-only (sine:440 and fluctuate:25 set the frequency).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" frequency' -l 'frequency' -d 'Frequency of sine (Hz, default 1) or pulses per second of fluctuate (default 50).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" play-for' -l 'play-for' -d 'Play in bursts: seconds of sound…' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" pause-for' -l 'pause-for' -d '…then seconds of digital silence (the device stays open).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" fade' -l 'fade' -d 'Fade in and out of each burst, in seconds (default 0.1).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" volume' -l 'volume' -d 'Level of the clip: a fraction of full scale or decibels (-40dB); default 0.01.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" max-level' -l 'max-level' -d 'Ceiling no output sample may exceed (fraction or dB); default 0.05.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" clip' -l 'clip' -d 'WAV file to loop instead of the embedded clip.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" clip-base64' -l 'clip-base64' -d 'WAV file to loop, as base64 text.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" lead-in' -l 'lead-in' -d 'With --carry: after the device is switched to a carried player\'s format (the one break a format change needs), play keepalived\'s signal in it this long before the player\'s first frame, like 2s (0 to 10s; default 0): a receiver that mutes while it relocks loses silence, not the music\'s start. The player\'s start waits that much longer.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start"' -l 'output' -d 'Play to NAME with settings of its own: \'NAME OPTIONS…\' in one word, OPTIONS spelled like the options above (--signal, --frequency, --volume, --max-level, --clip, --clip-base64, --play-for, --pause-for, --fade, and --on-active, --on-idle, --on-idle-after for this output instead of the global ones), e.g. --output \'plughw:CARD=DAC --signal sine --frequency 30 --volume -50dB\' or --output \'hw:CARD=DAC --on-active "gpioset gpiochip0 17=1"\'. Repeat for several; NAME is played like a --device. No output may exceed the global --max-level.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start"' -l 'pause-when' -d 'Stop keeping awake while the login session is locked, or idle for --idle-after (repeat for both); it plays again the moment the session is active. Follows logind\'s LockedHint and IdleHint.' -rfka 'locked idle'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" idle-after' -l 'idle-after' -d 'With --pause-when idle: how long the session must have been idle, like 90s, 10min or 1h (default 10min).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" on-active' -l 'on-active' -d 'Run this command when real audio starts on an output that was idle (a player through keepalived:, another stream on a kept sink): its words split like a shell\'s, run without one; KEEPALIVED_EVENT, KEEPALIVED_OUTPUT, KEEPALIVED_PROGRAM and KEEPALIVED_CARD/KEEPALIVED_DEVICE or KEEPALIVED_SINK in its environment; its output goes to the log. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" on-idle' -l 'on-idle' -d 'Run this command when an output\'s real audio has stopped for --on-idle-after; as --on-active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" on-idle-after' -l 'on-idle-after' -d 'How long no real audio must play before an output is idle, like 90s, 10min or 1h (default 5min). Pauses between tracks and track skips stay active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" hook-timeout' -l 'hook-timeout' -d 'How long --on-active and --on-idle may run before they are ended (SIGTERM to their process group, SIGKILL a second later), like 10s or 1min (default 30s).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" power-on-wait' -l 'power-on-wait' -d 'Hold a player\'s open through keepalived: until --on-active has ended (it switches the amplifier on), at most this long, like 5s (from 100ms to 30s; default: no hold; needs --on-active or --cec): the first note plays on an amplifier that is on, while keepalived keeps the card awake. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" power-on-settle' -l 'power-on-settle' -d 'With --power-on-wait: how long the open still waits after --on-active has ended (with --cec and no --on-active: after the receiver is woken), for an amplifier or receiver that takes a moment to play once on, like 500ms (default 0; within --power-on-wait).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" carry' -l 'carry' -d 'Carry a player\'s audio through keepalived: on keepalived\'s own running stream, unchanged, instead of handing the card over: the link to the receiver or DAC never stops between keepalived\'s signal and the music (keepalived on the card\'s own PCM, hw:, in ring-loop or stream mode, IEC958-only ports such as a Pi\'s HDMI included; a player whose format differs gets the device switched to it once). Experimental: see docs/players.md.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" cec' -l 'cec' -d 'Follow the box\'s real audio on HDMI-CEC through this adapter (the kernel\'s CEC framework, like /dev/cec0): when an output becomes active keepalived, as a Playback device, asks the audio system (an AV receiver or soundbar, logical address 5) to turn on and play it (System Audio Mode Request); the TV is left alone. An adapter that is missing or has no physical address yet is waited for.' -rF
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" cec-wake-tv' -l 'cec-wake-tv' -d 'With --cec: also turn the TV on and switch it to the box\'s input (Image View On, Active Source) when the box becomes active.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" cec-standby' -l 'cec-standby' -d 'With --cec: when every output is idle (--on-idle-after), send Standby to what keepalived itself switched on in that active period (it reported standby, or nothing, before keepalived\'s wake): the audio system, and the TV only with --cec-wake-tv. Nothing is put in standby after another device became the active source, nor what the user switched off.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" cec-take-over' -l 'cec-take-over' -d 'With --cec: replace another program\'s configuration of the adapter (Kodi\'s libcec, cec-ctl) with keepalived\'s Playback device. Without it keepalived leaves such an adapter alone, says so in the log and in status, and waits for the other program to let go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" retry-max' -l 'retry-max' -d 'Longest wait between two attempts to reopen a lost device, in seconds.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" buffer' -l 'buffer' -d 'Device buffer to ask for, in seconds (default 2; 8 for a sound server\'s sink).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" no-ring-loop' -l 'no-ring-loop' -d 'Stream to every output, even where the hardware could loop its ring buffer on its own (hw:, plughw:, hdmi: over a card): the device is then not held by the ring loop\'s settings, at the cost of a wakeup about once a second.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" linger' -l 'linger' -d 'On sound-server outputs (pulse, pipewire, a default that goes to PulseAudio or PipeWire): keep the output awake only until this long after any other stream last played on its sink, then let it sleep; keep it awake again as soon as another stream plays. Seconds, or 90s, 10min, 1h. Not supported on hardware outputs.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" v verbose' -l 'verbose' -s 'v' -d 'Log debug detail.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived start" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived stop" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived stop" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived stop" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived status" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived status" json' -l 'json' -d 'Print one JSON object.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived status" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived status" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived events" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived events" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived events" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" json' -l 'json' -d 'Print one JSON object with the same structure.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" exclusive' -l 'exclusive' -d 'Show what --all/--digital/--analog would pick with --exclusive.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices"' -l 'exclude' -d 'Show what --all/--digital/--analog would pick with this --exclude pattern (repeat for several); a running daemon\'s own patterns are shown too.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" all-pcms v verbose' -s 'v' -l 'verbose' -l 'all-pcms' -d 'Also list every PCM name ALSA knows, aliases and plug-ins included.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived devices" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test"' -s 'd' -l 'device' -d 'ALSA PCM to keep awake (repeat for several).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" all' -l 'all' -d 'Keep every output awake: the sound server\'s sinks when one answers (never a card it owns), else the cards (see \'keepalived devices\'); outputs that appear or vanish are picked up or dropped within 2 s.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" digital' -l 'digital' -d 'Keep the digital outputs awake (HDMI, DisplayPort, S/PDIF, IEC958), picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" analog' -l 'analog' -d 'Keep the analog outputs awake, picked up and dropped as they come and go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" bluetooth' -l 'bluetooth' -d 'Also keep the sound server\'s Bluetooth sinks awake (no selection picks them on its own: a headset must sleep to save its battery); alone, only those. They play a low 30 Hz sine in bursts that survives the Bluetooth codec.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" exclusive' -l 'exclusive' -d 'With --all/--digital/--analog, take a card device without a shared (dmix) form through plughw, locking other programs out of it.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test"' -l 'exclude' -d 'With --all/--digital/--analog/--bluetooth, leave out the outputs (cards\' PCMs, the sound server\'s sinks) whose name or description matches this shell-style pattern (\'*bluez*\', \'USB*\'; repeat for several). See \'keepalived devices --exclude\'.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" signal' -l 'signal' -d 'What to play: clip (the default), zero, fluctuate, sine, white, pink, brown or open-only (sine:440 and fluctuate:25 set the frequency).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" frequency' -l 'frequency' -d 'Frequency of sine (Hz, default 1) or pulses per second of fluctuate (default 50).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" play-for' -l 'play-for' -d 'Play in bursts: seconds of sound…' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" pause-for' -l 'pause-for' -d '…then seconds of digital silence (the device stays open).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" fade' -l 'fade' -d 'Fade in and out of each burst, in seconds (default 0.1).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" volume' -l 'volume' -d 'Level of the clip: a fraction of full scale or decibels (-40dB); default 0.01.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" max-level' -l 'max-level' -d 'Ceiling no output sample may exceed (fraction or dB); default 0.05.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" clip' -l 'clip' -d 'WAV file to loop instead of the embedded clip.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" clip-base64' -l 'clip-base64' -d 'WAV file to loop, as base64 text.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" lead-in' -l 'lead-in' -d 'With --carry: after the device is switched to a carried player\'s format (the one break a format change needs), play keepalived\'s signal in it this long before the player\'s first frame, like 2s (0 to 10s; default 0): a receiver that mutes while it relocks loses silence, not the music\'s start. The player\'s start waits that much longer.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test"' -l 'output' -d 'Play to NAME with settings of its own: \'NAME OPTIONS…\' in one word, OPTIONS spelled like the options above (--signal, --frequency, --volume, --max-level, --clip, --clip-base64, --play-for, --pause-for, --fade, and --on-active, --on-idle, --on-idle-after for this output instead of the global ones), e.g. --output \'plughw:CARD=DAC --signal sine --frequency 30 --volume -50dB\' or --output \'hw:CARD=DAC --on-active "gpioset gpiochip0 17=1"\'. Repeat for several; NAME is played like a --device. No output may exceed the global --max-level.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test"' -l 'pause-when' -d 'Stop keeping awake while the login session is locked, or idle for --idle-after (repeat for both); it plays again the moment the session is active. Follows logind\'s LockedHint and IdleHint.' -rfka 'locked idle'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" idle-after' -l 'idle-after' -d 'With --pause-when idle: how long the session must have been idle, like 90s, 10min or 1h (default 10min).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" on-active' -l 'on-active' -d 'Run this command when real audio starts on an output that was idle (a player through keepalived:, another stream on a kept sink): its words split like a shell\'s, run without one; KEEPALIVED_EVENT, KEEPALIVED_OUTPUT, KEEPALIVED_PROGRAM and KEEPALIVED_CARD/KEEPALIVED_DEVICE or KEEPALIVED_SINK in its environment; its output goes to the log. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" on-idle' -l 'on-idle' -d 'Run this command when an output\'s real audio has stopped for --on-idle-after; as --on-active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" on-idle-after' -l 'on-idle-after' -d 'How long no real audio must play before an output is idle, like 90s, 10min or 1h (default 5min). Pauses between tracks and track skips stay active.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" hook-timeout' -l 'hook-timeout' -d 'How long --on-active and --on-idle may run before they are ended (SIGTERM to their process group, SIGKILL a second later), like 10s or 1min (default 30s).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" power-on-wait' -l 'power-on-wait' -d 'Hold a player\'s open through keepalived: until --on-active has ended (it switches the amplifier on), at most this long, like 5s (from 100ms to 30s; default: no hold; needs --on-active or --cec): the first note plays on an amplifier that is on, while keepalived keeps the card awake. Once per active period, not per track.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" power-on-settle' -l 'power-on-settle' -d 'With --power-on-wait: how long the open still waits after --on-active has ended (with --cec and no --on-active: after the receiver is woken), for an amplifier or receiver that takes a moment to play once on, like 500ms (default 0; within --power-on-wait).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" carry' -l 'carry' -d 'Carry a player\'s audio through keepalived: on keepalived\'s own running stream, unchanged, instead of handing the card over: the link to the receiver or DAC never stops between keepalived\'s signal and the music (keepalived on the card\'s own PCM, hw:, in ring-loop or stream mode, IEC958-only ports such as a Pi\'s HDMI included; a player whose format differs gets the device switched to it once). Experimental: see docs/players.md.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" cec' -l 'cec' -d 'Follow the box\'s real audio on HDMI-CEC through this adapter (the kernel\'s CEC framework, like /dev/cec0): when an output becomes active keepalived, as a Playback device, asks the audio system (an AV receiver or soundbar, logical address 5) to turn on and play it (System Audio Mode Request); the TV is left alone. An adapter that is missing or has no physical address yet is waited for.' -rF
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" cec-wake-tv' -l 'cec-wake-tv' -d 'With --cec: also turn the TV on and switch it to the box\'s input (Image View On, Active Source) when the box becomes active.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" cec-standby' -l 'cec-standby' -d 'With --cec: when every output is idle (--on-idle-after), send Standby to what keepalived itself switched on in that active period (it reported standby, or nothing, before keepalived\'s wake): the audio system, and the TV only with --cec-wake-tv. Nothing is put in standby after another device became the active source, nor what the user switched off.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" cec-take-over' -l 'cec-take-over' -d 'With --cec: replace another program\'s configuration of the adapter (Kodi\'s libcec, cec-ctl) with keepalived\'s Playback device. Without it keepalived leaves such an adapter alone, says so in the log and in status, and waits for the other program to let go.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" retry-max' -l 'retry-max' -d 'Longest wait between two attempts to reopen a lost device, in seconds.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" buffer' -l 'buffer' -d 'Device buffer to ask for, in seconds (default 2; 8 for a sound server\'s sink).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" no-ring-loop' -l 'no-ring-loop' -d 'Stream to every output, even where the hardware could loop its ring buffer on its own (hw:, plughw:, hdmi: over a card): the device is then not held by the ring loop\'s settings, at the cost of a wakeup about once a second.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" linger' -l 'linger' -d 'On sound-server outputs (pulse, pipewire, a default that goes to PulseAudio or PipeWire): keep the output awake only until this long after any other stream last played on its sink, then let it sleep; keep it awake again as soon as another stream plays. Seconds, or 90s, 10min, 1h. Not supported on hardware outputs.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" v verbose' -l 'verbose' -s 'v' -d 'Log debug detail.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" socket' -l 'socket' -d 'Control socket (default: $KEEPALIVED_SOCKET, else $XDG_RUNTIME_DIR/keepalived/control.sock, else /run/keepalived-audio/control.sock for root).' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" config' -l 'config' -d 'Options file as run takes it (KEEPALIVED_OPTIONS="…"): test the outputs the service with that file keeps awake.' -rfka ''
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" y yes' -s 'y' -l 'yes' -d 'Play without asking (required without a terminal on stdin).'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" version' -l 'version' -d 'Show the version.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived test" h help' -s 'h' -l 'help' -d 'Show help information.'
complete -c 'keepalived' -n '__keepalived_should_offer_completions_for_flags_or_options "keepalived help" version' -l 'version' -d 'Show the version.'

# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_agent_global_optspecs
    string join \n q/quiet v/verbose h/help V/version
end

function __fish_agent_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_agent_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_agent_using_subcommand
    set -l cmd (__fish_agent_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c agent -n "__fish_agent_needs_command" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_needs_command" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_needs_command" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_needs_command" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_needs_command" -f -a "interrupts" -d 'Inspect and convert interrupt payloads'
complete -c agent -n "__fish_agent_needs_command" -f -a "validate" -d 'Lint a package directory offline'
complete -c agent -n "__fish_agent_needs_command" -f -a "plan" -d 'Dry run: which steps a run would run or skip, and why'
complete -c agent -n "__fish_agent_needs_command" -f -a "status" -d 'A verdict, then what the agent left on a host'
complete -c agent -n "__fish_agent_needs_command" -f -a "logs" -d 'The logs of a package\'s latest run, or of one step or interrupt operation'
complete -c agent -n "__fish_agent_needs_command" -f -a "reset" -d 'Make work run again: show, then (with --yes) remove its completion markers'
complete -c agent -n "__fish_agent_needs_command" -f -a "try" -d 'A package\'s whole lifecycle in a throwaway sandbox, and what it changed'
complete -c agent -n "__fish_agent_needs_command" -f -a "completions" -d 'Shell completions of the MODEs, the subcommands and their flags'
complete -c agent -n "__fish_agent_needs_command" -f -a "man" -d 'The manual page agent.1 (roff), on stdout'
complete -c agent -n "__fish_agent_needs_command" -f -a "apply" -d 'Run the apply steps; completed steps are skipped'
complete -c agent -n "__fish_agent_needs_command" -f -a "apply-check" -d 'Run the apply checks; when all pass, record the version'
complete -c agent -n "__fish_agent_needs_command" -f -a "config" -d 'Run the config steps (after a configMap change), every one each time'
complete -c agent -n "__fish_agent_needs_command" -f -a "config-check" -d 'Run the config checks'
complete -c agent -n "__fish_agent_needs_command" -f -a "upgrade" -d 'Run the upgrade steps, every one each time'
complete -c agent -n "__fish_agent_needs_command" -f -a "upgrade-check" -d 'Run the upgrade checks; when all pass, record the version'
complete -c agent -n "__fish_agent_needs_command" -f -a "uninstall" -d 'Run the uninstall steps, every one each time'
complete -c agent -n "__fish_agent_needs_command" -f -a "uninstall-check" -d 'Run the uninstall checks; when all pass, record `uninstalled`'
complete -c agent -n "__fish_agent_needs_command" -f -a "post-interrupt" -d 'Run the post-interrupt steps; completed steps are skipped'
complete -c agent -n "__fish_agent_needs_command" -f -a "post-interrupt-check" -d 'Run the post-interrupt checks'
complete -c agent -n "__fish_agent_needs_command" -f -a "interrupt" -d 'Run an interrupt\'s operations, each once per SKYHOOK_RESOURCE_ID'
complete -c agent -n "__fish_agent_needs_command" -f -a "help" -d 'Print the help of a MODE or subcommand'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -f -a "list" -d 'Every interrupt kind this binary knows: built-in and linked third-party kinds'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -f -a "encode" -d 'JSON payload -> base64 INTERRUPT_DATA (validated by decoding it)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and not __fish_seen_subcommand_from list encode decode" -f -a "decode" -d 'base64 INTERRUPT_DATA -> canonical JSON'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from list" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from list" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from list" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from list" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from encode" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from encode" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from encode" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from encode" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from encode" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from decode" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from decode" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from decode" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from decode" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand interrupts; and __fish_seen_subcommand_from decode" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand validate" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand validate" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand validate" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand validate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand validate" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand plan" -l state-dir -d 'STATE as a host path (e.g. /var/lib/skyhook/sk1), instead of SKYHOOK_ROOT_DIR or the one directory of the operator\'s layout found on the host' -r -f -a "(__fish_complete_directories)"
complete -c agent -n "__fish_agent_using_subcommand plan" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand plan" -l diff -d 'Show a unified diff (host file, then root_dir file) for each `changed` overlay file; binary and large files are named, not diffed. In JSON: a `diff` field on those writes'
complete -c agent -n "__fish_agent_using_subcommand plan" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand plan" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand plan" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand plan" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand status" -l state-dir -d 'STATE as a host path (e.g. /var/lib/skyhook/sk1), instead of SKYHOOK_ROOT_DIR or the directories found on the host' -r -f -a "(__fish_complete_directories)"
complete -c agent -n "__fish_agent_using_subcommand status" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand status" -l json -d 'Same as `--format json`'
complete -c agent -n "__fish_agent_using_subcommand status" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand status" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand status" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand logs" -l package -d 'The package (default: the only one with state)' -r
complete -c agent -n "__fish_agent_using_subcommand logs" -l package-version -d 'The package version (default: that of the package\'s latest run)' -r
complete -c agent -n "__fish_agent_using_subcommand logs" -l step -d 'A step: its path in config.json' -r
complete -c agent -n "__fish_agent_using_subcommand logs" -l operation -d 'An interrupt operation, <type>_<index> (e.g. node_restart_0), or its type' -r
complete -c agent -n "__fish_agent_using_subcommand logs" -l run -d 'Which one, counting back from the newest: 1 is the newest (see below)' -r
complete -c agent -n "__fish_agent_using_subcommand logs" -l state-dir -d 'STATE as a host path, instead of SKYHOOK_ROOT_DIR or the one found on the host' -r -F
complete -c agent -n "__fish_agent_using_subcommand logs" -l format -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand logs" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand logs" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand logs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand logs" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand reset" -l stage -d 'With COPY_DIR: only the steps of this stage MODE' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l step -d 'With COPY_DIR: only this step (its path in config.json)' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l package -d 'Every step marker of this package, without its package directory' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l package-version -d 'With --package: only this version (default: every version)' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l interrupt -d 'The interrupt markers of this resource ID (<prefix>_<package>_<version>)' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l operation -d 'With --interrupt: only this operation, `<type>_<index>` (e.g. node_restart_0)' -r
complete -c agent -n "__fish_agent_using_subcommand reset" -l state-dir -d 'STATE as a host path, instead of SKYHOOK_ROOT_DIR or the one found on the host' -r -f -a "(__fish_complete_directories)"
complete -c agent -n "__fish_agent_using_subcommand reset" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand reset" -l yes -d 'Remove the files; without it, only show them'
complete -c agent -n "__fish_agent_using_subcommand reset" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand reset" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand reset" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand reset" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand try" -l root -d 'The host root to use as the read-only lower layer' -r -f -a "(__fish_complete_directories)"
complete -c agent -n "__fish_agent_using_subcommand try" -l stages -d 'Comma-separated stages to run before the interrupts' -r
complete -c agent -n "__fish_agent_using_subcommand try" -l interrupt -d 'An interrupt payload as JSON (e.g. \'{"type":"node_restart"}\'), followed by post-interrupt and post-interrupt-check; repeatable' -r
complete -c agent -n "__fish_agent_using_subcommand try" -l configmap -d 'Install FILE as configMap key NAME (COPY_DIR/configmaps/NAME); repeatable' -r
complete -c agent -n "__fish_agent_using_subcommand try" -l env -d 'Set an environment variable for the stages (the package\'s env); repeatable' -r
complete -c agent -n "__fish_agent_using_subcommand try" -l keep -d 'Keep the upper layer, the stage outputs and report.json in DIR (new or empty)' -r -f -a "(__fish_complete_directories)"
complete -c agent -n "__fish_agent_using_subcommand try" -l format -d 'text for people; json: one document for programs (docs/schemas/)' -r -f -a "text\t''
json\t'One JSON document on stdout, also on failure (docs/schemas/)'"
complete -c agent -n "__fish_agent_using_subcommand try" -l no-network -d 'Give the sandbox a new, empty network namespace (default: the host\'s network)'
complete -c agent -n "__fish_agent_using_subcommand try" -l json -d 'Same as `--format json` (fields in docs/try.md)'
complete -c agent -n "__fish_agent_using_subcommand try" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand try" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand try" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c agent -n "__fish_agent_using_subcommand try" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand completions" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand completions" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand completions" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand completions" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand man" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand man" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand man" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand man" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand apply" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand apply" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand apply" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand apply" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand apply-check" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand apply-check" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand apply-check" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand apply-check" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand config" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand config" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand config" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand config" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand config-check" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand config-check" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand config-check" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand config-check" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand upgrade" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand upgrade" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand upgrade" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand upgrade" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand upgrade-check" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand upgrade-check" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand upgrade-check" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand upgrade-check" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand uninstall" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand uninstall" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand uninstall" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand uninstall" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand uninstall-check" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand uninstall-check" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand uninstall-check" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand uninstall-check" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt-check" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt-check" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt-check" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand post-interrupt-check" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand interrupt" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand interrupt" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupt" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand interrupt" -s V -l version -d 'Print version'
complete -c agent -n "__fish_agent_using_subcommand help" -s q -l quiet -d 'Log errors only (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand help" -s v -l verbose -d 'Log debug records too (instead of SKYHOOK_AGENT_LOG, default info)'
complete -c agent -n "__fish_agent_using_subcommand help" -s h -l help -d 'Print help'
complete -c agent -n "__fish_agent_using_subcommand help" -s V -l version -d 'Print version'

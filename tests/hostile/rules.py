"""The rules padconv keeps on hostile input, each with the tests that prove it.

``docs/reliability.md`` renders this table (tests/hostile/make_reliability_doc.py) and
tests/hostile/test_reliability_doc.py checks that every proof exists: ``FILE::test_name`` (a
test function of that file under tests/) or ``case:NAME`` (a hostile-corpus case).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    """One promise and where it is proven."""

    area: str
    rule: str
    proofs: tuple[str, ...]


INPUT_LIMIT = "io/test_input_limit.py"
SIGNALS = "cli/test_interrupt_and_closed_streams.py"
FAULTS = "hostile/test_faults.py"
NAMES_STREAMS = "hostile/test_attack_corpus_names_and_folder_streams.py"
OUTPUTS = "cli/test_output_targets.py"
ATTACKS = "hostile/test_attack_corpus_refusals.py"
ATTACK_RESULTS = "hostile/test_attack_corpus_results.py"
ATTACK_STREAMS = "hostile/test_attack_corpus_streams.py"

RULES = [
    Rule("confinement", "External data stays in the tensor's (or model's) folder: no absolute "
         "path, no `..`, no symlink leading out, a regular file",
         ("io/test_properties_readers.py::test_external_data_never_leaves_the_folder",
          "case:pb_external_parent", "case:pb_external_absolute", "case:pb_external_symlink")),
    Rule("confinement", "External data in a file with more than one hard link (st_nlink > 1 on "
         "the opened descriptor) is refused unless `--allow-hardlinks` is given: a path check "
         "cannot see a hard link to a file elsewhere",
         ("io/test_hardlinked_external_data.py::test_commands_refuse_it_in_one_line",
          "io/test_hardlinked_external_data.py::test_from_model_refuses_a_hardlinked_initializer",
          "case:pb_external_hardlink_outside", "case:model_initializer_hardlink_outside")),
    Rule("confinement", "Pickles are never loaded; inputs are regular files (no FIFO, device)",
         ("case:npy_pickled_object", "case:input_is_fifo", "case:input_symlink_to_device")),
    Rule("bounds", "One input limit, `--max-input-bytes` (default half of the available "
         "memory), on the bytes of an input brought into memory at once, checked from declared "
         "sizes before they are read: a whole input read into memory (.npy/.npz/.pb files, "
         "external data, models, stdin, `@FILE`, Zarr arrays), each box the tiled and dask "
         "engines read of an .npy or Zarr input, each Zarr chunk or shard (decoded whole)",
         (f"{INPUT_LIMIT}::test_files_over_the_limit_are_refused_before_reading",
          f"{INPUT_LIMIT}::test_model_over_the_limit_is_refused",
          f"{INPUT_LIMIT}::test_out_of_core_reads_over_the_limit_are_refused",
          f"{INPUT_LIMIT}::test_zarr_chunk_that_decodes_over_the_limit_is_refused",
          f"{INPUT_LIMIT}::test_zarr_array_over_the_limit_is_refused_in_memory",
          "case:file_npy_over_input_limit", "case:tiled_read_over_input_limit",
          "case:model_over_input_limit")),
    Rule("bounds", "stdin is read against the limit, header first: an .npy header is judged "
         "before its body arrives, a TensorProto is checked field by field as it streams "
         "(`< /dev/zero` is refused at the first byte), an .npz is cut at the limit",
         (f"{INPUT_LIMIT}::test_endless_device_on_stdin_is_refused_at_once",
          f"{INPUT_LIMIT}::test_npy_header_on_stdin_is_judged_before_the_body_arrives",
          f"{INPUT_LIMIT}::test_endless_well_formed_tensorproto_stream_stops_at_the_limit",
          "case:stdin_zeros", "case:stdin_yes", "case:stdin_tensorproto_stream_over_limit")),
    Rule("bounds", "A header never makes padconv allocate what the file does not hold",
         ("case:npy_header_terabytes", "case:stdin_npy_header_terabytes")),
    Rule("bounds", "The result is refused before computing when over `--max-output-bytes` "
         "(default half of the available memory)",
         ("case:pad_output_absurd", "case:pad_output_over_limit")),
    Rule("bounds", "Sizes are parsed exactly; more than 8 EiB is a usage error",
         (f"{OUTPUTS}::test_absurd_sizes_are_refused",
          f"{OUTPUTS}::test_size_flag_of_400_nines_is_one_line",
          "case:size_flag_memory_limit_400_nines", "case:size_flag_max_output_400_nines")),
    Rule("bounds", "Every list in a message shows at most 12 names, then `... and N more`",
         ("io/test_message_lists.py::test_npz_with_many_members_gives_a_short_message",
          "io/test_message_lists.py::test_tensorproto_with_a_million_dims_gives_a_short_message",
          "case:npz_100k_members")),
    Rule("bounds", "Reading a model is linear in its size (subgraphs share the constants "
         "around them, no copy per subgraph)",
         ("models/test_subgraph_constants.py::"
          "test_outer_constant_is_seen_two_levels_down_and_inner_one_shadows_it",
          "case:model_40k_constants_40k_if_subgraphs",
          "case:model_20k_if_subgraphs_with_folding")),
    Rule("models", "A malformed attribute (a type other than the operator defines, or "
         "UNDEFINED) is refused naming the node and the attribute",
         ("models/test_malformed_attributes.py::test_conv_group_of_the_wrong_type_is_refused",
          "models/test_malformed_attributes.py::"
          "test_verify_refuses_a_constant_of_the_wrong_type",
          "case:model_conv_group_undefined", "case:verify_constant_value_typed_int")),
    Rule("signals", "Ctrl-C or SIGTERM in the middle of a long Conv (memory, tiled and dask "
         "engines) or while stdin is read: exit 130/143, one line, no traceback, no output and "
         "no temporary file left, within a fraction of a second (a Ctrl-C during CPython's own "
         "start-up, before padconv runs, gets CPython's traceback; nothing is written then)",
         (f"{SIGNALS}::test_a_signal_in_the_middle_of_a_long_conv_ends_the_run_at_once",
          f"{SIGNALS}::test_ctrl_c_while_reading_stdin_is_one_line",
          f"{FAULTS}::test_ctrl_c_while_computing",
          f"{FAULTS}::test_ctrl_c_while_writing_out_of_core")),
    Rule("signals", "SIGTERM/SIGHUP: exit 143/129, temporary files removed",
         (f"{FAULTS}::test_sigterm_while_writing_leaves_no_temp_file",)),
    Rule("signals", "A SIGINT or SIGHUP the caller ignores (a background job, `nohup`) stays "
         "ignored: the run goes on",
         (f"{SIGNALS}::test_signals_the_caller_ignores_stay_ignored",)),
    Rule("streams", "The reader of stdout going away: exit 141 (or 0), nothing on stderr",
         (f"{FAULTS}::test_closed_stdout_pipe_is_quiet",)),
    Rule("streams", "stdout closed (`>&-`): a result for stdout is refused in one line, exit 2;"
         " a result for `-o FILE` is written; a closed stdin is one line",
         (f"{SIGNALS}::test_closed_stdout_is_one_line_and_exit_2",
          f"{SIGNALS}::test_closed_stdout_does_not_stop_a_file_output",
          f"{SIGNALS}::test_closed_stdin_is_one_line")),
    Rule("streams", "Nothing follows the outcome: what a library logs, warns or raises in a "
         "finaliser while the interpreter exits (asyncio's \"Task was destroyed but it is "
         "pending!\" for the chunk reads zarr left running after a corrupt chunk) adds no "
         "line to stderr",
         (f"{SIGNALS}::test_what_libraries_say_while_the_interpreter_exits_adds_nothing",
          "hostile/test_attack_corpus_refusals.py::"
          "test_attack_is_refused_in_one_line_and_writes_nothing")),
    Rule("streams", "An input truncated or replaced by another process during `--engine "
         "tiled` or `dask`: one line, exit 2, no result (every box, strided or not, is read "
         "with pread on a descriptor checked after opening, never memory-mapped: no SIGBUS)",
         ("engines/test_input_changed_during_tiled_run.py::"
          "test_input_truncated_during_a_tiled_pad_is_one_line",
          "engines/test_input_changed_during_tiled_run.py::"
          "test_input_truncated_during_a_strided_conv_or_reflect_pad_is_one_line",
          "engines/test_input_changed_during_tiled_run.py::"
          "test_strided_read_after_truncation_is_an_input_error")),
    Rule("streams", "An `.npy` input rewritten in place during `--engine tiled` (same inode, "
         "even the same size): its size, st_mtime_ns and st_ctime_ns are checked on the "
         "descriptor before each read and once more after the last read, before the result is "
         "published; a change is one line, exit 2, nothing published",
         ("engines/test_input_changed_during_tiled_run.py::"
          "test_input_rewritten_in_place_during_a_tiled_pad_is_one_line",
          "engines/test_input_changed_during_tiled_run.py::"
          "test_a_rewrite_after_the_last_read_publishes_nothing",
          "engines/test_input_changed_during_tiled_run.py::"
          "test_tile_read_after_an_in_place_rewrite_is_an_input_error")),
    Rule("exit codes", "Every bad input or flag: exit 2, one line naming the file or flag and "
         "the rule, nothing on stdout, nothing written",
         ("hostile/test_hostile_corpus.py::test_hostile_case_is_refused_cleanly",)),
    Rule("outputs", "`-o ''` and `-o` naming the `--emit-onnx` file are usage errors",
         (f"{OUTPUTS}::test_empty_output_path_is_a_usage_error",
          f"{OUTPUTS}::test_output_and_emitted_model_on_one_file_is_refused",
          "case:output_empty_path", "case:output_same_as_emit_onnx")),
    Rule("outputs", "An existing output is never half-overwritten: written atomically, kept "
         "as it was when the run fails",
         (f"{FAULTS}::test_existing_output_untouched_on_failure",
          f"{FAULTS}::test_concurrent_writers_leave_one_complete_file")),
    Rule("confinement", "Every entry of a local Zarr store is a regular file or folder inside "
         "it: a chunk symlinked out of the store, a FIFO, device or socket is refused (show, "
         "in memory, dask), and so is a chunk or metadata file with more than one hard link "
         "unless `--allow-hardlinks` is given (the external-data rule, checked when the store "
         "is opened); a corrupt chunk or a chunk length of 0 is one line",
         (f"{ATTACKS}::test_attack_is_refused_in_one_line_and_writes_nothing",
          "io/test_hardlinked_zarr_entries.py::test_commands_refuse_it_in_one_line",
          "io/test_hardlinked_zarr_entries.py::test_library_refuses_a_hardlinked_store_entry",
          f"{ATTACK_RESULTS}::test_attack_gets_the_specifications_result")),
    Rule("inputs", "An .npz with two entries for one array name (`a.npy` twice, `a` and "
         "`a.npy`) is refused: zip readers disagree on which one is meant",
         (f"{ATTACKS}::test_attack_is_refused_in_one_line_and_writes_nothing",)),
    Rule("outputs", "An extra output (`--emit-onnx`, `audit --junit-xml`, `--png`) never names "
         "an input file (by any spelling, a hard link, FILE of FILE:NAME, the `--from-model` "
         "model): a usage error before anything is read or written",
         (f"{ATTACKS}::test_attack_is_refused_in_one_line_and_writes_nothing",)),
    Rule("streams", "A standard stream that is a folder (`padconv pad - < /`): CPython stops "
         "at start-up with its own fatal error, before padconv runs; nothing is written",
         (f"{NAMES_STREAMS}::test_a_standard_stream_that_is_a_folder",)),
    Rule("outputs", "An output whose name is at the file system's NAME_MAX is written: the "
         "temporary file beside it gets a name cut to fit (in memory and tiled)",
         (f"{NAMES_STREAMS}::test_an_output_name_at_name_max_is_written",)),
    Rule("outputs", "A disk filled by another process while the tiled engine writes: one "
         "line, exit 2, nothing published, no temporary file left (tiles are written with "
         "pwrite, never through a memory map, so no SIGBUS)",
         ("hostile/test_attack_corpus_full_disk.py::"
          "test_disk_filled_during_a_tiled_conv_is_one_line",)),
    Rule("exit codes", "The error line has no control character or line separator, whatever "
         "a value from the environment or a file holds (escaped as `\\x1b`, `\\n`): one line, "
         "and no escape sequence reaches the terminal",
         ("cli/test_error_line_is_terminal_safe.py::"
          "test_an_escape_sequence_in_an_environment_variable_is_escaped",)),
    Rule("exit codes", "The error line is bounded: a list echoed from an argument is cut to a "
         "dozen items, and any line over 2,000 characters is cut in its middle (the flag or "
         "file at its start and the rule at its end stay)",
         ("cli/test_error_line_is_terminal_safe.py::"
          "test_a_list_echoed_from_a_huge_argument_is_cut",
          "cli/test_error_line_is_terminal_safe.py::"
          "test_a_huge_value_echoed_whole_is_cut_in_the_middle")),
    Rule("streams", "stderr that cannot be written (`2>/dev/full`, `2>&-`): the line is "
         "dropped and the exit code is the run's own: 2 for a refused input, 0 with the output "
         "written for a good run (a progress line that cannot be written does not stop it)",
         ("cli/test_stderr_that_cannot_be_written.py::test_a_refused_input_still_exits_2",
          "cli/test_stderr_that_cannot_be_written.py::test_a_good_run_exits_0_with_its_output",
          "cli/test_stderr_that_cannot_be_written.py::"
          "test_the_progress_line_to_a_full_stderr_does_not_stop_the_run")),
    Rule("streams", "A text report (show, compare, verify, audit, `--explain`) to a closed "
         "stdout or a full device: one line naming `<stdout>`, exit 2",
         (f"{ATTACK_STREAMS}::test_report_to_a_closed_stdout_is_one_line",
          f"{ATTACK_STREAMS}::test_report_to_a_full_device_is_one_line")),
]

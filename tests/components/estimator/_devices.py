"""Test helper: two logical CPU devices, so MirroredStrategy runs 2 replicas on a CPU machine."""

import tensorflow as tf


def configure_two_cpus() -> bool:
    """Split the CPU into 2 logical devices (possible only before TensorFlow's runtime starts);
    True when 2 are available now."""
    try:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    except RuntimeError:  # the runtime already started: keep what it has
        pass
    return len(tf.config.list_logical_devices("CPU")) >= 2

"""The configuration: one YAML file parsed once into a frozen typed model."""

from srm.config.loader import (
    CONFIG_ENV,
    default_config_path,
    load_config,
    load_config_with_issues,
    parse_config,
)
from srm.config.model import Cluster, Flow, LocalBroker, SrmConfig
from srm.config.settings import FlowSettings, option_names

__all__ = [
    "CONFIG_ENV",
    "Cluster",
    "Flow",
    "FlowSettings",
    "LocalBroker",
    "SrmConfig",
    "default_config_path",
    "load_config",
    "load_config_with_issues",
    "option_names",
    "parse_config",
]

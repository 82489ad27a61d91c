"""Cluster Energy Saving (Helios §4.3): node-demand forecasting, power controllers, replay, energy.

Light imports only; the LightGBM forecaster lives in :mod:`dlsched.energy.forecaster` and the
end-to-end pipeline in :mod:`dlsched.experiments.helios.energy`.
"""

from dlsched.energy.accounting import EnergyModel
from dlsched.energy.actions import Action, ControllerStats, ForecastSource, PowerController, PowerOff, PowerOn
from dlsched.energy.controller import CESController, CESParams
from dlsched.energy.vanilla import VanillaDRSController

__all__ = [
    "Action", "CESController", "CESParams", "ControllerStats", "EnergyModel", "ForecastSource",
    "PowerController", "PowerOff", "PowerOn", "VanillaDRSController",
]

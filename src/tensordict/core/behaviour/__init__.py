"""(room docstring: written below)"""

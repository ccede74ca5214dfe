"""The Textual dashboard. Only this package may import textual or rich."""
